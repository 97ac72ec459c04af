package failover

import (
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// fullJitter is an exponential backoff whose every wait is drawn uniformly
// from [0, base), where base starts at the initial interval and doubles up
// to the maximum. Full jitter gives the lowest expected recovery time to a
// single caller and spreads many callers apart.
type fullJitter struct {
	base *backoff.ExponentialBackOff
	rand func(n int64) int64
}

var _ backoff.BackOff = (*fullJitter)(nil)

func newFullJitter(initial, max time.Duration) *fullJitter {
	return &fullJitter{
		base: backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(initial),
			backoff.WithMaxInterval(max),
			backoff.WithMultiplier(2),
			backoff.WithRandomizationFactor(0),
			backoff.WithMaxElapsedTime(0),
		),
		rand: rand.Int64N,
	}
}

// NextBackOff returns the next wait.
func (b *fullJitter) NextBackOff() time.Duration {
	base := b.base.NextBackOff()
	if base <= 0 {
		return 0
	}
	return time.Duration(b.rand(int64(base)))
}

// Reset starts the sequence again from the initial interval.
func (b *fullJitter) Reset() { b.base.Reset() }
