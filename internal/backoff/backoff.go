package backoff

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	exp "github.com/cenkalti/backoff/v4"

	"github.com/pgfailover/pgfailover/internal/clock"
)

// FullJitter is an exponential backoff whose every wait is drawn uniformly
// from [0, base), where base starts at the initial interval and doubles up
// to the maximum. Full jitter gives the lowest expected recovery time to a
// single caller and spreads many callers apart.
type FullJitter struct {
	base *exp.ExponentialBackOff
	rand func(n int64) int64
}

var _ exp.BackOff = (*FullJitter)(nil)

// NewFullJitter returns a FullJitter whose base starts at initial and
// doubles up to max.
func NewFullJitter(initial, max time.Duration) *FullJitter {
	return &FullJitter{
		base: exp.NewExponentialBackOff(
			exp.WithInitialInterval(initial),
			exp.WithMaxInterval(max),
			exp.WithMultiplier(2),
			exp.WithRandomizationFactor(0),
			exp.WithMaxElapsedTime(0),
		),
		rand: rand.Int64N,
	}
}

// NextBackOff returns the next wait.
func (b *FullJitter) NextBackOff() time.Duration {
	base := b.base.NextBackOff()
	if base <= 0 {
		return 0
	}
	return time.Duration(b.rand(int64(base)))
}

// Reset starts the sequence again from the initial interval.
func (b *FullJitter) Reset() { b.base.Reset() }

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
