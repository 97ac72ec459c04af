package failover_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// TestReaderBehindASpreadingEndpoint: the Pool names the primary and a
// reader endpoint that spreads new connections over two replicas; the
// one its probe did not reach has stopped replaying. Right after each
// write, one read through the Reader (pinned by the write), then several
// at once, so that the Reader holds connections to both replicas behind
// the one name. Each read judges the server its connection reached, not the
// name: none misses the write it follows.
func TestReaderBehindASpreadingEndpoint(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	primary, reps := c.Primary(), c.Replicas()
	ep, err := c.Endpoint(reps...)
	if err != nil {
		t.Fatal(err)
	}
	dsn := strings.Replace(c.ConnStringFor([]*failovertest.Node{primary, reps[0]}, "pool_max_conns=4"), reps[0].Addr(), ep.Addr(), 1)
	pool := newPool(t, ctx, dsn)
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id bigint)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	// The replica the host's probe did not reach stops replaying: what
	// the Pool knows of the host's freshness is the other one's.
	var paused *failovertest.Node
	waitUntil(t, 10*time.Second, "the endpoint's host to name its server", func() bool {
		server := hostStat(t, pool, ep.Addr()).Server
		for i, r := range reps {
			if r.Addr() == server {
				paused = reps[1-i]
			}
		}
		return paused != nil
	})
	if err := paused.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = paused.ResumeReplay(ctx) })

	const writes, readers = 50, 4
	var mu sync.Mutex
	misses, reads := 0, 0
	for i := range writes {
		if _, err := pool.Exec(ctx, "INSERT INTO orders VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
		// One read first, which checks the position on its connection;
		// then several at once, on every connection the Reader holds.
		var wg sync.WaitGroup
		for k := range readers + 1 {
			if k == 1 {
				wg.Wait()
			}
			wg.Go(func() {
				var seen bool
				err := pool.Reader().QueryRow(ctx, "SELECT EXISTS (SELECT FROM orders WHERE id = $1)", i).Scan(&seen)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("read after write %d: %v", i, err)
					return
				}
				reads++
				if !seen {
					misses++
				}
			})
		}
		wg.Wait()
	}
	st := hostStat(t, pool, ep.Addr())
	t.Logf("%d reads, %d missed the write before them; the endpoint's host: server %s, %d Reader connections", reads, misses, st.Server, st.Reads.TotalConns())
	if misses > 0 {
		t.Errorf("%d of %d reads missed the write before them", misses, reads)
	}
}

// TestReadsThroughEndpointsFailover: the Pool names a writer endpoint and
// a reader endpoint, each following the cluster 300 ms after a failover
// (the primary crashes, the best standby is promoted a second later).
// Writers write and read back each acknowledged write through the
// Reader; other readers read on. No read fails, none misses the write
// before it, and the longest time without a successful read is
// reported.
func TestReadsThroughEndpointsFailover(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2), failovertest.SyncReplication())
	writer, err := c.PrimaryEndpoint(300 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := c.ReplicaEndpoint(300 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	dsn := strings.Replace(writer.ConnString("pool_max_conns=4"), writer.Addr(), writer.Addr()+","+reader.Addr(), 1)
	pool := newPool(t, ctx, dsn)
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id bigint)"); err != nil {
		t.Fatal(err)
	}

	var (
		mu        sync.Mutex
		readsAt   []time.Time
		readErrs  []error
		misses    int
		readBacks int
		next      atomic.Int64
	)
	read := func(sql string, args ...any) (bool, error) {
		var ok bool
		err := pool.Reader().QueryRow(ctx, sql, args...).Scan(&ok)
		at := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			readErrs = append(readErrs, err)
		} else {
			readsAt = append(readsAt, at)
		}
		return ok, err
	}
	writers := startLoop(t, 2, func() {
		id := next.Add(1)
		if _, err := pool.Exec(ctx, "INSERT INTO orders VALUES ($1)", id); err != nil {
			return // the crash's writes in flight; their outcome is not this test's
		}
		seen, err := read("SELECT EXISTS (SELECT FROM orders WHERE id = $1)", id)
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			readBacks++
			if !seen {
				misses++
			}
		}
	})
	readers := startLoop(t, 2, func() { _, _ = read("SELECT true") })
	waitUntil(t, 30*time.Second, "reads before the failover", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return readBacks >= 20
	})

	crashed := time.Now()
	if _, err := c.Failover(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	written := func() int64 { return next.Load() }
	before := written()
	waitUntil(t, 30*time.Second, "writes after the failover", func() bool { return written() > before+20 })
	writers.stop()
	readers.stop()

	mu.Lock()
	defer mu.Unlock()
	var gap time.Duration
	for i := 1; i < len(readsAt); i++ {
		if readsAt[i].After(crashed) {
			gap = max(gap, readsAt[i].Sub(readsAt[i-1]))
		}
	}
	t.Logf("%d reads, %d read-backs of a write, longest time without a read after the crash %v", len(readsAt), readBacks, gap.Round(time.Millisecond))
	for _, err := range readErrs {
		t.Errorf("a read failed: %v", err)
	}
	if misses > 0 {
		t.Errorf("%d of %d read-backs missed the write before them", misses, readBacks)
	}
}
