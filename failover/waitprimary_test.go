package failover_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// reader runs count queries through the pool until stopped and keeps every
// error.
type reader struct {
	*loop

	mu   sync.Mutex // guards the fields below
	ok   int
	errs []error
}

func startReaders(t *testing.T, ctx context.Context, pool *failover.Pool, n int) *reader {
	r := &reader{}
	r.loop = startLoop(t, n, func() {
		var count int64
		err := pool.QueryRow(ctx, "SELECT count(*) FROM writes").Scan(&count)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err == nil {
			r.ok++
		} else {
			r.errs = append(r.errs, err)
		}
	})
	return r
}

func (r *reader) okCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ok
}

// checkAcked fails the test unless the writes table on the pool's primary
// agrees with what every write returned: each acknowledged id present
// exactly once, none present twice, none that failed otherwise than with
// ErrCommitOutcomeUnknown present at all.
func checkAcked(t *testing.T, ctx context.Context, pool *failover.Pool, w *writer) {
	t.Helper()
	v, err := w.ledger.Check(ctx, pool, "writes", "id")
	if err != nil {
		t.Error(err)
	}
	t.Logf("writes: %v", v)
}

// checkOnlyInFlightWritesFailed fails the test unless every failed write
// failed with ErrCommitOutcomeUnknown, and there are at most inFlight of
// them: the writes that were on the wire when the primary died.
func checkOnlyInFlightWritesFailed(t *testing.T, w *writer, inFlight int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, err := range w.errs {
		if !errors.Is(err, failover.ErrCommitOutcomeUnknown) {
			t.Errorf("a write failed with %v; only writes in flight at the fault may fail, with ErrCommitOutcomeUnknown", err)
		}
	}
	if len(w.errs) > inFlight {
		t.Errorf("%d writes failed; at most the %d in flight at the fault may", len(w.errs), inFlight)
	}
}

// TestSlowPromotion kills the primary and promotes a replica only after a
// gap with no primary at all, as a cluster manager does after its leader
// lease runs out. With default settings every read and every write that
// was not on the wire at the fault waits for the new primary and
// completes.
func TestSlowPromotion(t *testing.T) {
	skipUnderShort(t)
	for _, gap := range []time.Duration{3 * time.Second, 10 * time.Second} {
		t.Run(fmt.Sprint(gap), func(t *testing.T) {
			ctx := testContext(t)
			c := failovertest.Start(t, failovertest.Replicas(2), failovertest.SyncReplication())
			pool := newPool(t, ctx, c.ConnString(""))
			const writers, readers = 4, 4
			w := startWriters(t, ctx, pool, writers)
			r := startReaders(t, ctx, pool, readers)
			waitUntil(t, 30*time.Second, "writes and reads before the fault", func() bool {
				return w.okCount() >= 50 && r.okCount() >= 50
			})

			if err := c.Primary().Crash(ctx); err != nil {
				t.Fatal(err)
			}
			acked, read := w.okCount(), r.okCount()
			// The gap is the scenario: no primary exists for this long.
			time.Sleep(gap)
			if got := w.okCount(); got != acked {
				t.Fatalf("%d writes were acknowledged with no primary", got-acked)
			}
			next, err := c.BestStandby(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Promote(ctx, next); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 30*time.Second, "writes and reads on the new primary", func() bool {
				return w.okCount() >= acked+50 && r.okCount() >= read+50
			})
			w.stop()
			r.stop()

			r.mu.Lock()
			for _, err := range r.errs {
				t.Errorf("a read failed: %v", err)
			}
			r.mu.Unlock()
			checkOnlyInFlightWritesFailed(t, w, writers)
			checkAcked(t, ctx, pool, w)
			t.Logf("gap %v: %d writes acknowledged, %d failed; %d reads", gap, w.okCount(), w.errCount(), r.okCount())
		})
	}
}
