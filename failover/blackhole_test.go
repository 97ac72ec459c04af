package failover_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/internal/faultproxy"
)

// blackhole makes the proxy swallow everything in both directions, as a
// host that stops answering does: connections stay open, the proxy's side
// of the socket still acknowledges what is sent, and no byte gets through.
// New connections are accepted and then hear nothing.
func blackhole(p *faultproxy.Proxy) { p.SetBlackhole(true) }

// proxiedPrimary returns the cluster's connection string with the primary
// reached through a proxy, and that proxy.
func proxiedPrimary(t *testing.T, c *failovertest.Cluster, params string) (string, *faultproxy.Proxy) {
	t.Helper()
	proxy := startProxy(t, c.Primary())
	return strings.Replace(c.ConnString(params), c.Primary().Addr(), proxy.Addr(), 1), proxy
}

// closeWhileSilent closes pool while its host stays blackholed, and
// returns how long Close took. That figure is logged, not asserted: Close
// gives what pgconn gave up on about a second (closeGrace), and how long
// it takes beyond that is the machine's. What is asserted is that Close
// returns while the host still answers nothing, so that it does not wait
// on the dead host; the minute only bounds that wait, so that a Close that
// hangs fails the test with a message instead of the test binary's
// timeout.
func closeWhileSilent(t *testing.T, pool *failover.Pool) time.Duration {
	t.Helper()
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pool.Close()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Close did not return with a blackholed host: it waits on the dead host")
	}
	return time.Since(start)
}

// TestCloseWithBlackholedHost: a Pool whose host went silent with a cancel
// request in flight there closes without the host answering, and leaves
// no goroutine behind.
func TestCloseWithBlackholedHost(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	before := goleak.IgnoreCurrent()
	dsn, proxy := proxiedPrimary(t, c, "pool_max_conns=2")
	pool, err := failover.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	blackhole(proxy)

	// A statement whose caller gives up on the dead host: pgconn then
	// sends a cancel request there, which nothing answers.
	callCtx, cancel := context.WithTimeout(ctx, time.Second)
	_, err = pool.Exec(callCtx, "INSERT INTO nowhere VALUES (1)")
	cancel()
	if err == nil {
		t.Fatal("a write on a blackholed host succeeded")
	}

	t.Logf("Close with a blackholed host took %v", closeWhileSilent(t, pool))
	proxy.Close()
	goleak.VerifyNone(t, before)
}

// timedWrite is one write's outcome and when it ran.
type timedWrite struct {
	id         int64
	start, end time.Time
	err        error
}

// A primary that stops answering (blackholed, not closed) under writers,
// and a replica promoted: writes in flight on the dead host end with
// ErrCommitOutcomeUnknown naming it, ended by the Pool rather than by
// their callers' deadline, new writes go to the new primary, every
// acknowledged write is there once, and Close returns with the host still
// silent. How long each of these took is logged.
func TestBlackholedPrimaryUnderWriters(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	// The old primary runs on while the standby is promoted.
	c := failovertest.Start(t, failovertest.Replicas(1))
	old, promoted := c.Primary(), c.Replicas()[0]
	dsn, proxy := proxiedPrimary(t, c, "pool_max_conns=4")
	pool, err := failover.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			pool.Close()
		}
	}()
	if _, err := pool.Exec(ctx, "CREATE TABLE writes (id bigint)"); err != nil {
		t.Fatal(err)
	}

	var (
		next   atomic.Int64
		mu     sync.Mutex // guards writes
		writes []timedWrite
	)
	l := startLoop(t, 3, func() {
		w := timedWrite{id: next.Add(1), start: time.Now()}
		_, w.err = pool.Exec(ctx, "INSERT INTO writes (id) VALUES ($1)", w.id)
		w.end = time.Now()
		mu.Lock()
		writes = append(writes, w)
		mu.Unlock()
	})
	okSince := func(t0 time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, w := range writes {
			if w.err == nil && w.start.After(t0) {
				n++
			}
		}
		return n
	}
	waitUntil(t, 30*time.Second, "writes before the blackhole", func() bool { return okSince(time.Time{}) >= 30 })

	t0 := time.Now()
	blackhole(proxy)
	// No acknowledgement leaves the old primary once it is blackholed, so
	// every acknowledged write is in the WAL it has now. A failover
	// manager promotes a standby that has it all; the old primary stays up,
	// cut off from the client only.
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Promote(ctx, promoted); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "writes on the new primary", func() bool { return okSince(t0) >= 30 })
	l.stop()

	mu.Lock()
	defer mu.Unlock()
	var firstOK time.Time
	var stuck []timedWrite // writes started before the blackhole that ended after it
	for _, w := range writes {
		if w.err == nil && w.start.After(t0) && (firstOK.IsZero() || w.end.Before(firstOK)) {
			firstOK = w.end
		}
		if w.start.Before(t0) && w.end.After(t0) {
			stuck = append(stuck, w)
		}
	}
	var longest time.Duration
	for _, w := range writes {
		if w.err == nil {
			continue
		}
		if !errors.Is(w.err, failover.ErrCommitOutcomeUnknown) {
			t.Errorf("write %d failed with %v; want ErrCommitOutcomeUnknown", w.id, w.err)
			continue
		}
		var he *failover.HostError
		if !errors.As(w.err, &he) || he.Addr != proxy.Addr() {
			t.Errorf("write %d: %v does not name the blackholed host %s", w.id, w.err, proxy.Addr())
		}
		// The blackhole acknowledges every byte, so neither the kernel's
		// timeouts nor pgconn's end a statement there: only the Pool, on
		// finding the host silent, or the caller's context (the test's
		// two minutes) can.
		if errors.Is(w.err, context.DeadlineExceeded) || errors.Is(w.err, context.Canceled) {
			t.Errorf("write %d ended on its caller's context, not on the Pool's finding the host silent: %v", w.id, w.err)
		}
		from := w.start
		if from.Before(t0) {
			from = t0
		}
		longest = max(longest, w.end.Sub(from))
	}
	t.Logf("blackhole at t0: %d writes in flight; failed writes ended at most %v after t0 (or their start); first write on the new primary %v after t0",
		len(stuck), longest, firstOK.Sub(t0))
	for _, w := range stuck {
		t.Logf("  in flight at t0: write %d ended %v after t0: %v", w.id, w.end.Sub(t0), w.err)
	}
	if got := serverPort(t, ctx, pool); got != promoted.Port() {
		t.Errorf("pool writes to port %d, want the new primary's %d (old %d)", got, promoted.Port(), old.Port())
	}

	// Every acknowledged write reached the promoted standby, exactly once.
	var ledger writeLedger
	for _, w := range writes {
		ledger.Record(w.id, w.err)
	}
	if _, err := ledger.Check(ctx, pool, "writes", "id"); err != nil {
		t.Error(err)
	}

	closed = true
	t.Logf("Close took %v", closeWhileSilent(t, pool))
}

// Calls waiting for a connection of a host whose every connection hangs
// end with an error naming the host when their context ends, and move on
// once the Pool learns the host does not answer.
func TestAcquireWaitOnBlackholedHost(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	dsn, proxy := proxiedPrimary(t, c, "pool_max_conns=1&target=any")
	pool := newPool(t, ctx, dsn)
	if err := pool.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if got := serverPort(t, ctx, pool); got != c.Primary().Port() {
		t.Fatalf("pool reads from port %d, want the proxied primary first", got)
	}
	blackhole(proxy)

	// The pool's only connection hangs with this call.
	var wg sync.WaitGroup
	var heldErr error
	wg.Go(func() { _, heldErr = pool.Exec(ctx, "INSERT INTO nowhere VALUES (1)") })
	waitUntil(t, 10*time.Second, "the connection in use", func() bool {
		return hostStat(t, pool, proxy.Addr()).Pool.AcquiredConns() == 1
	})

	// A call waiting for that host's pool until its own deadline.
	callCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := pool.Exec(callCtx, "SELECT 1")
	cancel()
	var he *failover.HostError
	if !errors.As(err, &he) || he.Addr != proxy.Addr() || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("call whose deadline ended while it waited for the blackholed host: %v; want a HostError naming %s wrapping the deadline", err, proxy.Addr())
	}

	// Once the probe finds the host silent, the hung call ends and reads
	// go to the replica.
	var port int
	if err := pool.QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port); err != nil || port != c.Replicas()[0].Port() {
		t.Errorf("read after the blackhole: port %d, %v; want the replica's %d", port, err, c.Replicas()[0].Port())
	}
	wg.Wait()
	if !errors.Is(heldErr, failover.ErrCommitOutcomeUnknown) || !errors.As(heldErr, &he) || he.Addr != proxy.Addr() {
		t.Errorf("the hung write: %v; want ErrCommitOutcomeUnknown naming %s", heldErr, proxy.Addr())
	}
}
