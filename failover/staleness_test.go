package failover_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
)

// stampWriter writes increasing stamps through the Pool, one at a time,
// and remembers when each was acknowledged.
type stampWriter struct {
	mu    sync.Mutex
	next  int64
	stamp []int64     // acknowledged stamps, increasing
	acked []time.Time // when each was acknowledged
	loop  *loop
}

// stampChecker reads stamps through the Reader and counts reads that miss
// a stamp acknowledged more than maxLag before the read began: the
// staleness bound of docs/reads.md, with no allowance for scheduling and
// none needed. A stamp's time is taken after its write returned and a
// read's before it is routed, so a slow machine can only spare a read the
// check, never fail one the bound allows.
type stampChecker struct {
	mu     sync.Mutex
	ok     int
	errs   []error
	stale  int
	loop   *loop
	maxLag time.Duration
}

func startStamps(t *testing.T, ctx context.Context, pool *failover.Pool) *stampWriter {
	t.Helper()
	if _, err := pool.Exec(ctx, "CREATE TABLE stamps (i bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	w := &stampWriter{}
	w.loop = startLoop(t, 1, func() {
		w.mu.Lock()
		w.next++
		i := w.next
		w.mu.Unlock()
		if _, err := pool.Exec(ctx, "INSERT INTO stamps VALUES ($1)", i); err != nil {
			return // not acknowledged: nothing is owed
		}
		now := time.Now()
		w.mu.Lock()
		w.stamp = append(w.stamp, i)
		w.acked = append(w.acked, now)
		w.mu.Unlock()
	})
	return w
}

// owed returns the newest stamp acknowledged before t, if any.
func (w *stampWriter) owed(t time.Time) (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := sort.Search(len(w.acked), func(i int) bool { return !w.acked[i].Before(t) })
	if n == 0 {
		return 0, false
	}
	return w.stamp[n-1], true
}

func startStampCheckers(t *testing.T, ctx context.Context, pool *failover.Pool, w *stampWriter, n int, maxLag time.Duration) *stampChecker {
	c := &stampChecker{maxLag: maxLag}
	c.loop = startLoop(t, n, func() {
		began := time.Now()
		i, ok := w.owed(began.Add(-maxLag))
		var seen bool
		err := pool.Reader().QueryRow(ctx, "SELECT EXISTS (SELECT FROM stamps WHERE i = $1)", i).Scan(&seen)
		c.mu.Lock()
		defer c.mu.Unlock()
		switch {
		case err != nil:
			c.errs = append(c.errs, err)
		case ok && !seen:
			c.stale++
		default:
			c.ok++
		}
	})
	return c
}

func (c *stampChecker) okCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok
}
