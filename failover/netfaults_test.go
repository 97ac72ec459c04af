package failover_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
)

// hostState is the state of the host at addr as the Pool's target sees it.
func hostState(t *testing.T, pool *failover.Pool, addr string) hosthealth.State {
	t.Helper()
	return hostStat(t, pool, addr).State
}

// timedCall is one call's outcome and when it ran.
type timedCall struct {
	write      bool
	start, end time.Time
	err        error
}

// A slow network is not a failure: with 200 ms added to every round trip
// to the primary, under readers and writers and probes every 100 ms, no
// call fails, no call meets a failover event, the primary stays healthy
// throughout, and calls only get slower.
func TestLatencyIsNotAFailure(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	dsn, proxy := proxiedPrimary(t, c, "pool_max_conns=6&health_probe_interval=100ms")
	metrics, pool := newMeteredPool(t, ctx, dsn)
	if _, err := pool.Exec(ctx, "CREATE TABLE slow (id int)"); err != nil {
		t.Fatal(err)
	}

	var (
		mu    sync.Mutex // guards calls
		calls []timedCall
	)
	record := func(c timedCall) {
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
	}
	writers := startLoop(t, 3, func() {
		c := timedCall{write: true, start: time.Now()}
		_, c.err = pool.Exec(ctx, "INSERT INTO slow VALUES (1)")
		c.end = time.Now()
		record(c)
	})
	readers := startLoop(t, 3, func() {
		c := timedCall{start: time.Now()}
		var n int
		c.err = pool.QueryRow(ctx, "SELECT count(*) FROM slow").Scan(&n)
		c.end = time.Now()
		record(c)
	})
	// done counts the successful reads and writes started after t0.
	done := func(t0 time.Time) (reads, writes int) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range calls {
			if c.err != nil || !c.start.After(t0) {
				continue
			}
			if c.write {
				writes++
			} else {
				reads++
			}
		}
		return reads, writes
	}
	waitUntil(t, 30*time.Second, "calls before the latency", func() bool {
		r, w := done(time.Time{})
		return r >= 20 && w >= 20
	})

	// 100 ms each way: 200 ms more per round trip.
	proxy.SetLatency(100 * time.Millisecond)
	t0 := time.Now()
	var states []hosthealth.State
	waitUntil(t, 90*time.Second, "calls under latency", func() bool {
		states = append(states, hostState(t, pool, proxy.Addr()))
		r, w := done(t0)
		return r >= 30 && w >= 30
	})
	writers.stop()
	readers.stop()
	states = append(states, hostState(t, pool, proxy.Addr()))

	mu.Lock()
	defer mu.Unlock()
	var slowest, fastest time.Duration
	for _, c := range calls {
		if c.err != nil {
			t.Errorf("a call failed under latency: %v", c.err)
			continue
		}
		if !c.start.After(t0) {
			continue
		}
		d := c.end.Sub(c.start)
		slowest = max(slowest, d)
		if fastest == 0 || d < fastest {
			fastest = d
		}
	}
	t.Logf("%d calls; under latency the fastest took %v, the slowest %v; %d state samples", len(calls), fastest, slowest, len(states))
	// Every call started after the latency needs one round trip at least.
	if fastest < 190*time.Millisecond {
		t.Errorf("a call under 200 ms of added round trip took %v: the latency did not apply", fastest)
	}
	if i := slices.IndexFunc(states, func(s hosthealth.State) bool { return s != hosthealth.Healthy }); i >= 0 {
		t.Errorf("the slow primary was seen %v (sample %d of %d); want healthy throughout", states[i], i, len(states))
	}
	got := counters(t, ctx, metrics)
	if got["pgfailover.failover.survived"] != 0 || got["pgfailover.failover.failed"] != 0 {
		t.Errorf("counters %v: want no call to have met a failover event", got)
	}
}

// A connection reset in the middle of a result: the rows end with an error
// naming the host, and rows of a second execution are never appended. A
// reset before the first row reaches the caller is replayed, and the
// caller sees only the answer.
func TestConnectionReset(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	proxy := startProxy(t, c.Primary())
	// target=any: the replica could run the read again, and must not once
	// a row was delivered. Probes only at New and while a call waits.
	dsn := strings.Replace(c.ConnString("target=any&health_probe_interval=1h"), c.Primary().Addr(), proxy.Addr(), 1)

	t.Run("mid-row", func(t *testing.T) {
		pool := newPool(t, ctx, dsn)
		if got := serverPort(t, ctx, pool); got != c.Primary().Port() {
			t.Fatalf("pool reads from port %d, want the proxied primary %d first", got, c.Primary().Port())
		}
		// About 75 MB of rows, far more than the socket buffers on the
		// way hold, so the result is still streaming when the reset comes.
		const total = 5_000_000
		rows, err := pool.Query(ctx, "SELECT g FROM generate_series(1, $1::int) g", total)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []int32
		for rows.Next() {
			var g int32
			if err := rows.Scan(&g); err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				proxy.Reset()
			}
			got = append(got, g)
		}
		err = rows.Err()
		rows.Close()
		t.Logf("%d rows, then %v", len(got), err)
		if err == nil {
			t.Fatalf("the rows ended without an error after %d of %d rows", len(got), total)
		}
		var he *failover.HostError
		if !errors.As(err, &he) || he.Addr != proxy.Addr() {
			t.Errorf("error %v does not name the reset host %s", err, proxy.Addr())
		}
		if errors.Is(err, failover.ErrCommitOutcomeUnknown) {
			t.Errorf("a read reported as of unknown commit outcome: %v", err)
		}
		if len(got) == 0 || len(got) >= total {
			t.Fatalf("%d rows delivered; want some, not all %d", len(got), total)
		}
		for i, g := range got {
			if g != int32(i+1) {
				t.Fatalf("row %d is %d: rows of another execution were mixed in", i, g)
			}
		}
	})

	t.Run("before the first row", func(t *testing.T) {
		metrics, pool := newMeteredPool(t, ctx, dsn)
		if got := serverPort(t, ctx, pool); got != c.Primary().Port() {
			t.Fatalf("pool reads from port %d, want the proxied primary %d first", got, c.Primary().Port())
		}
		const marker = "reset-read-5d21"
		var wg sync.WaitGroup
		wg.Go(func() {
			whenExecuting(t, ctx, c.Primary(), marker, func(*pgx.Conn, int32) error {
				proxy.Reset()
				return nil
			})
		})
		var v, port int
		err := pool.QueryRow(ctx, "SELECT 42, current_setting('port')::int FROM pg_sleep(0.5) /* "+marker+" */").Scan(&v, &port)
		wg.Wait()
		if err != nil || v != 42 {
			t.Fatalf("read reset before its row = %d, %v; want 42 from another run", v, err)
		}
		t.Logf("answered by port %d (primary %d)", port, c.Primary().Port())
		if got := counters(t, ctx, metrics); got["pgfailover.failover.survived"] != 1 || got["pgfailover.failover.failed"] != 0 {
			t.Fatalf("counters %v: want the read counted as survived", got)
		}
	})
}
