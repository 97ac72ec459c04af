package backoff

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/pgfailover/pgfailover/internal/clock"
)

// Exponential is the module's one backoff curve: the base wait after the
// n-th failure in a row is Initial doubled n−1 times, and never more than
// Max. It is a value with no state; the caller counts the failures.
type Exponential struct {
	Initial, Max time.Duration
}

// Base returns the base wait after the n-th failure in a row, before
// jitter; n below 1 counts as 1. The doubling stops at Max, so no count of
// failures overflows it.
func (e Exponential) Base(n int) time.Duration {
	d := e.Initial
	for i := 1; i < n && d > 0 && d < e.Max; i++ {
		if d > e.Max/2 {
			d = e.Max
			break
		}
		d *= 2
	}
	return min(d, e.Max)
}

// Rand draws uniformly from [0, n), n > 0: rand.Int64N, or a fixed draw
// in tests.
type Rand = func(n int64) int64

// DrawFull draws a wait uniformly from [0, d): full jitter. It gives one
// caller the lowest expected wait and spreads many callers the most, but
// may draw a wait close to 0; a Pool's calls wait with it (FullJitter).
func DrawFull(d time.Duration, r Rand) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(r(int64(d)))
}

// DrawEqual draws a wait uniformly from [d/2, d]: equal jitter. It spreads
// callers that failed at the same moment while keeping at least half of
// the base wait, for a backoff whose point is to leave a host alone: the
// probe schedule's backoff of a host that cannot be reached, and the
// local-first fallback's cooldown of a candidate that failed.
func DrawEqual(d time.Duration, r Rand) time.Duration {
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + time.Duration(r(int64(d-half)+1))
}

// FullJitter is a sequence of waits on the Exponential curve, each drawn
// with DrawFull: the first from [0, initial), the base then doubling up to
// the maximum. It is used by one goroutine at a time.
type FullJitter struct {
	curve    Exponential
	failures int // waits drawn since the start or the last Reset
	rand     Rand
}

// NewFullJitter returns a FullJitter whose base starts at initial and
// doubles up to max.
func NewFullJitter(initial, max time.Duration) *FullJitter {
	return &FullJitter{curve: Exponential{Initial: initial, Max: max}, rand: rand.Int64N}
}

// NextBackOff returns the next wait.
func (b *FullJitter) NextBackOff() time.Duration {
	if b.failures < 1<<30 { // a count that the curve has long capped
		b.failures++
	}
	return DrawFull(b.curve.Base(b.failures), b.rand)
}

// Reset starts the sequence again from the initial interval.
func (b *FullJitter) Reset() { b.failures = 0 }

// Policy is a Pool's backoff: its failover_backoff_initial and
// failover_backoff_max, and its clock.
type Policy struct {
	Initial, Max time.Duration
	Clock        clock.Clock // nil means the wall clock
}

// Start returns a new sequence of waits under p, from its initial
// interval.
func (p Policy) Start() *Waits {
	c := p.Clock
	if c == nil {
		c = clock.Real()
	}
	return &Waits{b: NewFullJitter(p.Initial, p.Max), clock: c}
}

// Waits is one sequence of waits: one retry loop's. It is used by one
// goroutine at a time.
type Waits struct {
	b     *FullJitter
	clock clock.Clock
}

// ErrStopped is what Wait returns when its stop channel closed first.
var ErrStopped = errors.New("pgfailover: backoff stopped")

// Wait waits the sequence's next backoff on the policy's clock. It returns
// nil when the wait is over, ctx's error when ctx ends first, and
// ErrStopped when stop is closed first (a nil stop never is).
func (w *Waits) Wait(ctx context.Context, stop <-chan struct{}) error {
	t := w.clock.NewTimer(w.b.NextBackOff())
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return ErrStopped
	}
}
