package failover_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// endpointLag is how long an endpoint keeps leading to the old primary
// after a failover in these drills: a DNS TTL, a health check's interval.
const endpointLag = 2 * time.Second

// TestWritesFollowALaggingEndpoint: the Pool names one endpoint, which
// keeps leading to the old primary, back as a standby, for endpointLag
// after a switchover. Writes wait, then resume once the endpoint moves to
// the new primary: the probe follows the name through fresh connections
// while its server is a standby streaming from a primary elsewhere.
// Every acknowledged write is on the new primary exactly once.
func TestWritesFollowALaggingEndpoint(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(1), failovertest.SyncReplication())
	ep, err := c.Endpoint(c.Primary())
	if err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, ctx, ep.ConnString("pool_max_conns=4"))
	w := startWriters(t, ctx, pool, 4)
	waitUntil(t, 30*time.Second, "writes before the switchover", func() bool { return w.okCount() >= 20 })

	old := c.Primary()
	next, err := c.Switchover(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The scenario: the endpoint lags behind the promotion.
	pause(t, ctx, endpointLag)
	if st := hostStat(t, pool, ep.Addr()); st.Server != old.Addr() {
		t.Errorf("before the move, the endpoint's host shows server %q, want the old primary %s", st.Server, old.Addr())
	}
	ep.MoveTo(next)
	moved := time.Now()
	t.Logf("first write acknowledged %v after the endpoint moved", firstWriteAfter(t, w, moved))
	waitUntil(t, 10*time.Second, "the host to show the new primary's server", func() bool {
		return hostStat(t, pool, ep.Addr()).Server == next.Addr()
	})
	w.stop()
	checkAcked(t, ctx, pool, w)
	checkOnlyInFlightWritesFailed(t, w, 4)
}

// TestWritesFollowAnEndpointThroughACrash: the primary behind the
// endpoint crashes, the best standby is promoted a second later (the
// other follows it, and stays its synchronous standby) and the endpoint
// follows 300 ms after that. Writes wait and resume; none that
// was not in flight at the crash fails.
func TestWritesFollowAnEndpointThroughACrash(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2), failovertest.SyncReplication())
	ep, err := c.Endpoint(c.Primary())
	if err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, ctx, ep.ConnString("pool_max_conns=4"))
	w := startWriters(t, ctx, pool, 4)
	waitUntil(t, 30*time.Second, "writes before the crash", func() bool { return w.okCount() >= 20 })

	next, err := c.Failover(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pause(t, ctx, 300*time.Millisecond) // the scenario: the endpoint follows late
	ep.MoveTo(next)
	moved := time.Now()
	t.Logf("first write acknowledged %v after the endpoint moved", firstWriteAfter(t, w, moved))
	w.stop()
	checkAcked(t, ctx, pool, w)
	checkOnlyInFlightWritesFailed(t, w, 4)
}

// pause waits d, the scenario's own time (an endpoint's lag), not a wait
// for anything; it fails the test when ctx ends first.
func pause(t *testing.T, ctx context.Context, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
}

// firstWriteAfter waits, up to 30 s, for a write of w acknowledged after
// t0, and returns how long after t0 the first one was.
func firstWriteAfter(t *testing.T, w *writer, t0 time.Time) time.Duration {
	t.Helper()
	waitUntil(t, 30*time.Second, "a write acknowledged after the move", func() bool {
		_, ok := w.firstAckAfter(t0)
		return ok
	})
	first, _ := w.firstAckAfter(t0)
	return first.Sub(t0).Round(time.Millisecond)
}
