package failover_test

import (
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
)

// TestWaitingCallsDoNotDial runs 200 writers through a Pool of four
// connections per host and stops the primary. Once the Pool knows the
// primary is down and the other host is a replica, the writers wait: only
// the probes touch the hosts, however many callers there are, and the
// replica gets the pool's four connections ahead of its promotion. When
// the replica is promoted, they all go on.
func TestWaitingCallsDoNotDial(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	old, replica := c.Primary(), c.Replicas()[0]
	cfg, err := failover.ParseConfig(c.ConnString("pool_max_conns=4"))
	if err != nil {
		t.Fatal(err)
	}
	count := countDials(cfg)
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE writes (id bigint)"); err != nil {
		t.Fatal(err)
	}

	w := startHerd(t, ctx, pool, 200, 20*time.Second)
	defer w.stop()
	waitUntil(t, 30*time.Second, "writes before the fault", func() bool { return w.acked.Load() >= 200 })

	if err := old.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	host := func(n *failovertest.Node) failover.HostStat { return hostStat(t, pool, n.Addr()) }
	waitUntil(t, 30*time.Second, "the primary known down", func() bool {
		return host(old).State == hosthealth.TransportError
	})
	oldDials, oldProbes := count(old), host(old).Probes
	replicaDials, replicaProbes := count(replica), host(replica).Probes
	ackedBefore := w.acked.Load()

	// Let the probes run a while the writers wait: the stopped primary's
	// on its backoff (a few a second), the replica's watches (each waits
	// on the server for about 200ms).
	waitUntil(t, 30*time.Second, "probes while the writers wait", func() bool {
		return host(old).Probes >= oldProbes+10 && host(replica).Probes >= replicaProbes+10
	})
	if got := w.acked.Load(); got != ackedBefore {
		t.Fatalf("%d writes acknowledged with no primary", got-ackedBefore)
	}
	dOld, pOld := count(old)-oldDials, host(old).Probes-oldProbes
	dReplica, pReplica := count(replica)-replicaDials, host(replica).Probes-replicaProbes
	// A probe of a host that is down dials it; one of a live replica uses
	// its open connection. Allow one dial in flight at the dead primary.
	// The replica gets the pool's four connections ahead of its
	// promotion, some perhaps before the counts began, and no more.
	if int64(dOld) > pOld+1 {
		t.Errorf("%d dials to the stopped primary during %d probes: callers dialled it", dOld, pOld)
	}
	if dReplica > 4 {
		t.Errorf("%d dials to the replica during %d probes: callers dialled a host in the wrong role", dReplica, pReplica)
	}
	if n := host(replica).Pool.TotalConns(); n > 4 {
		t.Errorf("%d connections to the replica while the writers wait, want at most the pool's 4 opened for its promotion", n)
	}
	t.Logf("while 200 writers waited: %d probes and %d dials of the stopped primary, %d probes and %d dials of the replica",
		pOld, dOld, pReplica, dReplica)

	if err := c.Promote(ctx, replica); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "writes on the new primary", func() bool { return w.acked.Load() >= ackedBefore+200 })
	w.checkOnlyInFlightFailed(t, 4)

}
