package failover_test

import (
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/topology"
)

// TestTopologyHintProbesTheNewPrimary: when the topology source names a
// new primary, the Pool probes that member at once and learns its role
// from the server, with no call waiting and health_probe_interval at ten
// minutes, so that nothing else would have asked it. A claim is only a
// hint: the source first names the replica the primary before it is
// promoted, and the Pool goes on seeing a replica there.
func TestTopologyHintProbesTheNewPrimary(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	old, next, other := c.Primary(), c.Replicas()[0], c.Replicas()[1]
	src := &fakeSource{updates: make(chan topology.Topology)}
	cfg, err := failover.ParseConfig(c.ConnString("health_probe_interval=10m"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Topology = src
	report := func(primary *failovertest.Node, replicas ...*failovertest.Node) {
		t.Helper()
		m := members(hosthealth.RolePrimary, primary)
		m.Members = append(m.Members, members(hosthealth.RoleReplica, replicas...).Members...)
		select {
		case src.updates <- m:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	created := make(chan *failover.Pool, 1)
	go func() {
		pool, err := failover.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Error(err)
		}
		created <- pool
	}()
	report(old, next, other)
	pool := <-created
	if pool == nil {
		t.FailNow()
	}
	defer pool.Close()
	probes := func(n *failovertest.Node) int64 { return hostStat(t, pool, n.Addr()).Probes }
	role := func(n *failovertest.Node) hosthealth.Role { return hostStat(t, pool, n.Addr()).Role }

	// A claim ahead of the server: the member is probed at once, and the
	// server's answer (in recovery) stands.
	before := probes(other)
	report(other, old, next)
	waitUntil(t, 30*time.Second, "a probe of the member named the primary", func() bool { return probes(other) > before })
	if r := role(other); r != hosthealth.RoleReplica {
		t.Errorf("after a claim ahead of any promotion the role is %v, want replica: the server decides", r)
	}

	// The promotion: until the source names it, nothing asks the server.
	if err := old.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Promote(ctx, next); err != nil {
		t.Fatal(err)
	}
	if r := role(next); r != hosthealth.RoleReplica {
		t.Fatalf("before the claim the Pool sees %v at the promoted server, want replica (its last answer)", r)
	}
	before = probes(next)
	report(next, old, other)
	waitUntil(t, 30*time.Second, "the Pool seeing the new primary", func() bool { return role(next) == hosthealth.RolePrimary })
	t.Logf("the member named the primary was probed %d times until its role was seen", probes(next)-before)
	if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
		t.Errorf("a call on the new primary: %v", err)
	}
}
