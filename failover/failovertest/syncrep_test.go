package failovertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// syncNames returns the node's synchronous_standby_names.
func syncNames(t *testing.T, ctx context.Context, n *failovertest.Node) string {
	t.Helper()
	return scalar[string](t, ctx, n, "SHOW synchronous_standby_names")
}

// commits runs a write on the primary p that must be acknowledged within
// a few seconds: a primary waiting for a synchronous standby it does not
// have would hold it until the deadline.
func commits(t *testing.T, ctx context.Context, p *failovertest.Node, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatalf("%s: a write on %s: %v", what, p, err)
	}
}

// waitSyncStandby waits until the primary p has a synchronous standby.
func waitSyncStandby(t *testing.T, ctx context.Context, p *failovertest.Node) {
	t.Helper()
	waitUntil(t, 30*time.Second, p.Name()+" having a synchronous standby", func() bool {
		return scalar[int64](t, ctx, p,
			"SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')") > 0
	})
}

// TestSyncReplicationOneReplica: with one replica and SyncReplication, the
// standby a Failover promotes is left with no standby, and takes commits
// anyway, with an empty synchronous_standby_names; the old primary, once
// rejoined, is its synchronous standby again. CrashPrimary and Promote do
// the same, and a Switchover hands the role back with a synchronous
// standby throughout.
func TestSyncReplicationOneReplica(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(1), failovertest.SyncReplication())
	n0, n1 := c.Nodes()[0], c.Nodes()[1]
	if err := n0.Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
		t.Fatal(err)
	}
	if got := syncNames(t, ctx, n0); got != "ANY 1 (node1)" {
		t.Errorf("node0 at the start: synchronous_standby_names = %q, want ANY 1 (node1)", got)
	}

	next, err := c.Failover(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if next != n1 {
		t.Fatalf("Failover promoted %v, want node1", next)
	}
	commits(t, ctx, n1, "after Failover")
	if got := syncNames(t, ctx, n1); got != "" {
		t.Errorf("node1, alone: synchronous_standby_names = %q, want it empty", got)
	}

	if err := c.Rejoin(ctx, n0); err != nil {
		t.Fatal(err)
	}
	if got := syncNames(t, ctx, n1); got != "ANY 1 (node0)" {
		t.Errorf("node1 after node0 rejoined: synchronous_standby_names = %q, want ANY 1 (node0)", got)
	}
	waitSyncStandby(t, ctx, n1)
	commits(t, ctx, n1, "after Rejoin")

	// The two halves apart.
	if _, err := c.CrashPrimary(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Promote(ctx, n0); err != nil {
		t.Fatal(err)
	}
	commits(t, ctx, n0, "after CrashPrimary and Promote")
	if err := c.Rejoin(ctx, n1); err != nil {
		t.Fatal(err)
	}
	waitSyncStandby(t, ctx, n0)

	// A switchover: the old primary comes back as the new one's standby.
	if _, err := c.Switchover(ctx, n1); err != nil {
		t.Fatal(err)
	}
	if got := syncNames(t, ctx, n1); got != "ANY 1 (node0)" {
		t.Errorf("node1 after the switchover: synchronous_standby_names = %q, want ANY 1 (node0)", got)
	}
	waitSyncStandby(t, ctx, n1)
	commits(t, ctx, n1, "after Switchover")
	if got := syncNames(t, ctx, n0); got != "" {
		t.Errorf("node0, a standby: synchronous_standby_names = %q, want it empty", got)
	}
}

// TestSyncReplicationTwoReplicas: the standby a Failover promotes has the
// other one, which follows it, as its synchronous standby.
func TestSyncReplicationTwoReplicas(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2), failovertest.SyncReplication())
	if err := c.Primary().Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
		t.Fatal(err)
	}
	next, err := c.Failover(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	other := c.Nodes()[1]
	if next == other {
		other = c.Nodes()[2]
	}
	if got, want := syncNames(t, ctx, next), "ANY 1 ("+other.Name()+")"; got != want {
		t.Errorf("%s: synchronous_standby_names = %q, want %q", next, got, want)
	}
	waitSyncStandby(t, ctx, next)
	commits(t, ctx, next, "after Failover")
}
