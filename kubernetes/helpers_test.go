package kubernetes_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/kubernetes"
	"github.com/pgfailover/pgfailover/kubernetes/kubetest"
	"github.com/pgfailover/pgfailover/topology"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitUntil polls cond every 5ms until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// updates wraps a topology source and keeps the time of each update.
type updates struct {
	topology.Source
	mu   sync.Mutex // guards seen
	seen []update
}

type update struct {
	at time.Time
	t  topology.Topology
}

func (u *updates) Watch(ctx context.Context, f func(topology.Topology)) error {
	return u.Source.Watch(ctx, func(t topology.Topology) {
		u.mu.Lock()
		u.seen = append(u.seen, update{time.Now(), t})
		u.mu.Unlock()
		f(t)
	})
}

// firstAfter returns the time of the first update after t0 whose
// members satisfy cond, zero if none.
func (u *updates) firstAfter(t0 time.Time, cond func(topology.Topology) bool) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, up := range u.seen {
		if up.at.After(t0) && cond(up.t) {
			return up.at
		}
	}
	return time.Time{}
}

func (u *updates) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

// open starts a Pool on c through its connection string, with its
// source wrapped to record updates.
func open(t *testing.T, ctx context.Context, c *kubetest.Cluster, params string) (*failover.Pool, *updates) {
	t.Helper()
	dsn, err := c.ConnString(params)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := kubernetes.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	up := &updates{Source: cfg.Topology}
	cfg.Topology = up
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, up
}

// write is one write of the load.
type write struct {
	start, end time.Time
	port       int
	err        error
}

// load runs writers and readers through the pool until stopped.
type load struct {
	ledger failovertest.Ledger[int]
	wg     sync.WaitGroup
	stopc  chan struct{}

	mu     sync.Mutex // guards the fields below
	writes []write
	reads  map[int]int // per server port
	rerrs  []error
}

func startLoad(t *testing.T, ctx context.Context, pool *failover.Pool, writers, readers int) *load {
	t.Helper()
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS drill (k int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "TRUNCATE drill"); err != nil {
		t.Fatal(err)
	}
	l := &load{stopc: make(chan struct{}), reads: map[int]int{}}
	var next sync.Mutex
	key := 0
	for range writers {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stopc:
					return
				default:
				}
				next.Lock()
				key++
				k := key
				next.Unlock()
				w := write{start: time.Now()}
				w.err = pool.QueryRow(ctx, "INSERT INTO drill VALUES ($1) RETURNING current_setting('port')::int", k).Scan(&w.port)
				w.end = time.Now()
				l.ledger.Record(k, w.err)
				l.mu.Lock()
				l.writes = append(l.writes, w)
				l.mu.Unlock()
			}
		})
	}
	reader := pool.Reader()
	for range readers {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stopc:
					return
				default:
				}
				var port int
				err := reader.QueryRow(ctx, "SELECT current_setting('port')::int FROM pg_sleep(0.002)").Scan(&port)
				l.mu.Lock()
				if err != nil {
					l.rerrs = append(l.rerrs, err)
				} else {
					l.reads[port]++
				}
				l.mu.Unlock()
			}
		})
	}
	return l
}

func (l *load) stop() {
	close(l.stopc)
	l.wg.Wait()
}

func (l *load) writeCount(port int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, w := range l.writes {
		if w.err == nil && (port == 0 || w.port == port) {
			n++
		}
	}
	return n
}

func (l *load) readCount(port int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reads[port]
}

// firstOn returns the first write acknowledged by the server on port
// after t0 (by acknowledgement time).
func (l *load) firstOn(port int, t0 time.Time) (write, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ws []write
	for _, w := range l.writes {
		if w.err == nil && w.port == port && w.end.After(t0) {
			ws = append(ws, w)
		}
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].end.Before(ws[j].end) })
	if len(ws) == 0 {
		return write{}, false
	}
	return ws[0], true
}

// startedAfterOn counts writes started after t0 that the server on port
// acknowledged.
func (l *load) startedAfterOn(port int, t0 time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, w := range l.writes {
		if w.err == nil && w.port == port && w.start.After(t0) {
			n++
		}
	}
	return n
}

func (l *load) errors() (werrs []error, rerrs []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.writes {
		if w.err != nil {
			werrs = append(werrs, w.err)
		}
	}
	return werrs, append([]error(nil), l.rerrs...)
}

// check stops the load and checks the ledger against the table.
func (l *load) check(t *testing.T, ctx context.Context, q failovertest.Querier) {
	t.Helper()
	l.stop()
	werrs, rerrs := l.errors()
	verdict, err := l.ledger.Check(ctx, q, "drill", "k")
	if err != nil {
		t.Error(err)
	}
	t.Logf("writes: %v; write errors %d, read errors %d", verdict, len(werrs), len(rerrs))
	for i, e := range werrs {
		if i < 3 {
			t.Logf("write error: %v", e)
		}
	}
	for i, e := range rerrs {
		if i < 3 {
			t.Errorf("read error: %v", e)
		}
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
