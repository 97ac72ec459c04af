package failover_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// statsOptions is a cluster whose servers count their statements
// (pg_stat_statements).
var statsOptions = pgtest.Options{Replicas: 2, Settings: map[string]string{"shared_preload_libraries": "pg_stat_statements"}}

// primaryCalls returns how many statements the primary ran since the
// last reset, and how many of them contain like (a LIKE pattern; "" for
// none), leaving out the statistics' own.
func primaryCalls(t *testing.T, ctx context.Context, c *pgtest.Cluster, like string) (all, matching int64) {
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
func startStats(t *testing.T, ctx context.Context, c *pgtest.Cluster) {
	t.Helper()
	if err := c.Primary().Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		t.Fatal(err)
	}
}

func resetStats(t *testing.T, ctx context.Context, c *pgtest.Cluster) {
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
// second reads through the Reader with the default settings: the
// replicas take at least 90% of its reads, and a read right after each of
// its own writes sees that write.
func TestReplicasTakeReadsOfAWritingService(t *testing.T) {
	skipUnderShort(t)
	c := pgtest.Start(t, statsOptions)
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
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		var port, n int
		if err := pool.Reader().QueryRow(ctx, "SELECT current_setting('port')::int, count(*)::int FROM bg").Scan(&port, &n); err != nil {
			t.Fatal(err)
		}
		reads++
		if port == primary {
			onPrimary++
		}
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
	share := float64(reads-onPrimary) / float64(reads)
	t.Logf("%d background writes; %d reads, %.1f%% on the replicas; own writes: %d read back on a replica of %d, %d missed; the primary ran %d statements, %d of them position requests",
		w.writes.Load(), reads, 100*share, ownOnReplica, own, missed, all, positions)
	if missed > 0 {
		t.Fatalf("%d of %d reads right after a write through the Pool missed it", missed, own)
	}
	if share < 0.9 {
		t.Fatalf("the replicas took %.1f%% of the reads, want at least 90%%", 100*share)
	}
}
