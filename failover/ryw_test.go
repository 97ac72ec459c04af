package failover_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// statsOptions is a cluster whose servers count their statements
// (pg_stat_statements).
var statsOptions = []failovertest.Option{failovertest.Replicas(2), failovertest.Setting("shared_preload_libraries", "pg_stat_statements")}

// primaryCalls returns how many statements the primary ran since the
// last reset, and how many of them contain like (a LIKE pattern; "" for
// none), leaving out the statistics' own.
func primaryCalls(t *testing.T, ctx context.Context, c *failovertest.Cluster, like string) (all, matching int64) {
	t.Helper()
	conn, err := c.Primary().Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	q := `SELECT coalesce(sum(calls), 0)::bigint, coalesce(sum(calls) FILTER (WHERE $1 <> '' AND query LIKE $1), 0)::bigint
		FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'`
	if err := conn.QueryRow(ctx, q, like).Scan(&all, &matching); err != nil {
		t.Fatal(err)
	}
	return all, matching
}

// startStats creates the extension and empties the primary's counts.
func startStats(t *testing.T, ctx context.Context, c *failovertest.Cluster) {
	t.Helper()
	if err := c.Primary().Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		t.Fatal(err)
	}
}

func resetStats(t *testing.T, ctx context.Context, c *failovertest.Cluster) {
	t.Helper()
	if err := c.Primary().Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		t.Fatal(err)
	}
}

// backgroundWriter writes through pool every interval until stopped.
type backgroundWriter struct {
	stopOnce sync.Once
	stopped  chan struct{}
	done     chan struct{}
	writes   atomic.Int64
}

func startBackgroundWriter(t *testing.T, ctx context.Context, pool *failover.Pool, interval time.Duration) *backgroundWriter {
	w := &backgroundWriter{stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-w.stopped:
				return
			case <-tick.C:
				if _, err := pool.Exec(ctx, "INSERT INTO bg (v) VALUES (1)"); err == nil {
					w.writes.Add(1)
				}
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *backgroundWriter) stop() {
	w.stopOnce.Do(func() { close(w.stopped) })
	<-w.done
}

// waitReplicasKnown waits until the Pool knows n replicas.
func waitReplicasKnown(t *testing.T, pool *failover.Pool, n int) {
	t.Helper()
	waitUntil(t, 10*time.Second, "the replicas known", func() bool {
		k := 0
		for _, h := range pool.Stat().Hosts() {
			if h.Role.String() == "replica" {
				k++
			}
		}
		return k == n
	})
}

// TestReplicasTakeReadsOfAWritingService: a service writing 10 times a
// second reads through the Reader with the default settings, so that
// every read is pinned by a write: the replicas take its reads (what
// share of them depends on how fast they replay on this machine, and is
// logged), and a read right after each of its own writes sees that write.
func TestReplicasTakeReadsOfAWritingService(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, statsOptions...)
	ctx := testContext(t)
	pool := newPool(t, ctx, c.ConnString(""))
	startStats(t, ctx, c)
	if _, err := pool.Exec(ctx, "CREATE TABLE bg (id serial, v int); CREATE TABLE own (v int)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	waitReplicasKnown(t, pool, 2)
	primary := c.Primary().Port()
	resetStats(t, ctx, c)
	w := startBackgroundWriter(t, ctx, pool, 100*time.Millisecond)

	var reads, onPrimary int
	read := func() (onReplica bool) {
		var port, n int
		if err := pool.Reader().QueryRow(ctx, "SELECT current_setting('port')::int, count(*)::int FROM bg").Scan(&port, &n); err != nil {
			t.Fatal(err)
		}
		reads++
		if port == primary {
			onPrimary++
		}
		return port != primary
	}
	// Three seconds of reads for the share logged below; then, if none of
	// them reached a replica, more until one does. What is asserted is
	// that the replicas serve a writing service's reads at all, not how
	// many of them: a replica that replays slower than replica_wait on a
	// loaded machine rightly leaves a read to the primary.
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		read()
	}
	windowReads, windowOnPrimary := reads, onPrimary
	if reads == onPrimary {
		waitUntil(t, 15*time.Second, "a read of the writing service on a replica", read)
	}
	missed, ownOnReplica := 0, 0
	const own = 25
	for i := 1; i <= own; i++ {
		if _, err := pool.Exec(ctx, "INSERT INTO own VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
		var got, port int
		if err := pool.Reader().QueryRow(ctx, "SELECT coalesce(max(v), 0), current_setting('port')::int FROM own").Scan(&got, &port); err != nil {
			t.Fatal(err)
		}
		if got != i {
			missed++
		}
		if port != primary {
			ownOnReplica++
		}
	}
	w.stop()
	all, positions := primaryCalls(t, ctx, c, "%pg_current_wal_insert_lsn()::text, current_setting%")
	share := float64(windowReads-windowOnPrimary) / float64(windowReads)
	t.Logf("%d background writes; %d reads in 3 s, %.1f%% on the replicas (%d reads in all, %d on the replicas); own writes: %d read back on a replica of %d, %d missed; the primary ran %d statements, %d of them position requests",
		w.writes.Load(), windowReads, 100*share, reads, reads-onPrimary, ownOnReplica, own, missed, all, positions)
	if missed > 0 {
		t.Fatalf("%d of %d reads right after a write through the Pool missed it", missed, own)
	}
}

// readReasons returns the Reader's routed reads so far, by
// "destination/reason".
func readReasons(t *testing.T, ctx context.Context, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, m := range collect(t, ctx, r) {
		sum, ok := m.Data.(metricdata.Sum[int64])
		if !ok || m.Name != "pgfailover.reads" {
			continue
		}
		for _, dp := range sum.DataPoints {
			dest, _ := dp.Attributes.Value("pgfailover.destination")
			reason, _ := dp.Attributes.Value("pgfailover.reason")
			out[dest.AsString()+"/"+reason.AsString()] += dp.Value
		}
	}
	return out
}

// ownWrite writes i through the Pool and reads the table back through the
// Reader at once: it returns what the read saw, and the port it read on.
func ownWrite(ctx context.Context, pool *failover.Pool, i int) (got, port int, err error) {
	if _, err := pool.Exec(ctx, "INSERT INTO own VALUES ($1)", i); err != nil {
		return 0, 0, err
	}
	err = pool.Reader().QueryRow(ctx, "SELECT coalesce(max(v), 0), current_setting('port')::int FROM own").Scan(&got, &port)
	return got, port, err
}

// startWritingService starts a primary with two replicas and a metered
// Pool (params added to its connection string) with tables bg and own,
// known to both replicas, and a background writer at 10 writes a second.
func startWritingService(t *testing.T, params string) (*failovertest.Cluster, context.Context, *sdkmetric.ManualReader, *failover.Pool, *backgroundWriter) {
	t.Helper()
	c := failovertest.Start(t, failovertest.Replicas(2))
	ctx := testContext(t)
	metrics, pool := newMeteredPool(t, ctx, c.ConnString(params))
	if _, err := pool.Exec(ctx, "CREATE TABLE bg (id serial, v int); CREATE TABLE own (v int)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	waitReplicasKnown(t, pool, 2)
	w := startBackgroundWriter(t, ctx, pool, 100*time.Millisecond)
	return c, ctx, metrics, pool, w
}

// TestReadYourWritesWhileReplayIsPaused: with replay paused on every
// replica under a background writer, no read misses the Pool's own
// writes and they are read on the primary; once replay resumes, reads go
// back to the replicas.
func TestReadYourWritesWhileReplayIsPaused(t *testing.T) {
	skipUnderShort(t)
	c, ctx, metrics, pool, w := startWritingService(t, "")
	for _, r := range c.Replicas() {
		if err := r.PauseReplay(ctx); err != nil {
			t.Fatal(err)
		}
	}
	primary := c.Primary().Port()
	for i := 1; i <= 25; i++ {
		got, port, err := ownWrite(ctx, pool, i)
		if err != nil {
			t.Fatal(err)
		}
		if got != i {
			t.Fatalf("with replay paused, the read after write %d saw %d (port %d)", i, got, port)
		}
		if port != primary {
			t.Fatalf("with replay paused, the read after write %d went to %d, not the primary %d", i, port, primary)
		}
	}
	for _, r := range c.Replicas() {
		if err := r.ResumeReplay(ctx); err != nil {
			t.Fatal(err)
		}
	}
	i := 25
	replicas := ports(c.Replicas()...)
	waitUntil(t, 10*time.Second, "reads after writes back on the replicas", func() bool {
		i++
		got, port, err := ownWrite(ctx, pool, i)
		if err == nil && got != i {
			t.Fatalf("after resuming, the read after write %d saw %d (port %d)", i, got, port)
		}
		return err == nil && replicas[port]
	})
	w.stop()
	t.Logf("reads: %v", readReasons(t, ctx, metrics))
}

// TestFirstReaderCallSeesEarlierWrites: until its Reader is asked for, a
// Pool does not time its writes; the first call of Reader counts as a
// write, so that a read through it right after a write made before it
// still sees that write, here on the primary, the replica's replay being
// paused.
func TestFirstReaderCallSeesEarlierWrites(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t)
	ctx := testContext(t)
	pool := newPool(t, ctx, c.ConnString(""))
	if _, err := pool.Exec(ctx, "CREATE TABLE own (v int)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	waitReplicasKnown(t, pool, 1)
	if err := c.Replicas()[0].PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO own VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var got, port int
	if err := pool.Reader().QueryRow(ctx, "SELECT coalesce(max(v), 0), current_setting('port')::int FROM own").Scan(&got, &port); err != nil {
		t.Fatal(err)
	}
	if got != 1 || port != c.Primary().Port() {
		t.Fatalf("the first read through the Reader saw %d on port %d: want the write, on the primary %d", got, port, c.Primary().Port())
	}
}

// TestReadYourWritesAcrossPromotion: a switchover while the Pool writes
// and reads its writes back: no read misses a write acknowledged before
// it, and reads go to the replicas of the new primary afterwards.
func TestReadYourWritesAcrossPromotion(t *testing.T) {
	skipUnderShort(t)
	c, ctx, metrics, pool, w := startWritingService(t, "health_probe_interval=200ms")

	var acked atomic.Int64 // the highest write acknowledged
	var rounds, missed, failed atomic.Int64
	var firstMiss atomic.Value
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			before := acked.Load()
			got, port, err := ownWrite(ctx, pool, i)
			if err != nil {
				// The write, or its read, fell into the switchover; a
				// failed write may still have committed.
				failed.Add(1)
				continue
			}
			acked.Store(int64(i))
			rounds.Add(1)
			if got < i || int64(got) < before {
				missed.Add(1)
				firstMiss.CompareAndSwap(nil, [3]int{i, got, port})
			}
		}
	}()
	waitUntil(t, 10*time.Second, "writes read back", func() bool { return acked.Load() > 20 })
	next := c.Replicas()[0]
	if _, err := c.Switchover(ctx, next); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 15*time.Second, "the new primary known", func() bool {
		return hostStat(t, pool, next.Addr()).Role.String() == "primary"
	})
	from := acked.Load()
	waitUntil(t, 15*time.Second, "writes read back after the switchover", func() bool { return acked.Load() > from+20 })
	close(stop)
	<-done
	if n := missed.Load(); n > 0 {
		t.Fatalf("%d reads missed a write acknowledged before them; first (write, read, port): %v", n, firstMiss.Load())
	}
	newReplicas := ports(c.Replicas()...)
	waitUntil(t, 15*time.Second, "reads after writes on the new primary's replicas", func() bool {
		i := int(acked.Load()) + 1000
		got, port, err := ownWrite(ctx, pool, i)
		if err == nil && got != i {
			t.Fatalf("the read after write %d saw %d (port %d)", i, got, port)
		}
		if err == nil {
			acked.Store(int64(i))
		}
		return err == nil && newReplicas[port] && port != next.Port()
	})
	w.stop()
	t.Logf("%d writes read back, %d write-then-read rounds failed in the switchover; reads: %v", rounds.Load(), failed.Load(), readReasons(t, ctx, metrics))
}

// TestPinnedReadsShareOneSample: 64 reads started together right after a
// write share one request for the primary's position, and every one sees
// the write.
func TestPinnedReadsShareOneSample(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, statsOptions...)
	ctx := testContext(t)
	metrics, pool := newMeteredPool(t, ctx, c.ConnString("pool_max_conns=64"))
	startStats(t, ctx, c)
	if _, err := pool.Exec(ctx, "CREATE TABLE own (v int)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	waitReplicasKnown(t, pool, 2)
	const bursts, readers = 10, 64
	var slowest time.Duration
	// Burst 0 opens the connections and is not counted.
	for b := 0; b <= bursts; b++ {
		if b == 1 {
			resetStats(t, ctx, c)
			slowest = 0
		}
		if _, err := pool.Exec(ctx, "INSERT INTO own VALUES ($1)", b); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		start := make(chan struct{})
		for range readers {
			wg.Go(func() {
				<-start
				began := time.Now()
				var got int
				err := pool.Reader().QueryRow(ctx, "SELECT coalesce(max(v), 0) FROM own").Scan(&got)
				took := time.Since(began)
				mu.Lock()
				defer mu.Unlock()
				slowest = max(slowest, took)
				if err == nil && got != b {
					err = fmt.Errorf("a read after write %d saw %d", b, got)
				}
				if err != nil {
					errs = append(errs, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("burst %d: %d reads failed; first: %v", b, len(errs), errs[0])
		}
	}
	_, positions := primaryCalls(t, ctx, c, "%pg_current_wal_insert_lsn()::text, current_setting%")
	// How long a read took is logged, not asserted: it includes waiting for
	// a connection on a loaded machine.
	t.Logf("%d bursts of %d reads: %d position requests on the primary; slowest read %v (replica_wait 20ms); reads: %v",
		bursts, readers, positions, slowest, readReasons(t, ctx, metrics))
	if positions > bursts {
		t.Fatalf("the primary answered %d position requests for %d bursts, want at most one each", positions, bursts)
	}
}
