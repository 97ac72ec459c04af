package failover

import (
	"time"

	"github.com/pgfailover/pgfailover/internal/backoff"
)

// fullJitter is the backoff of a call between attempts: see
// backoff.FullJitter, which the Listener (through backoffPolicy) and
// failover/stdlib's connector wait with too.
type fullJitter = backoff.FullJitter

func newFullJitter(initial, max time.Duration) *fullJitter {
	return backoff.NewFullJitter(initial, max)
}

// backoffPolicy is the Pool's backoff: failover_backoff_initial and
// failover_backoff_max, full jitter, on the Pool's clock.
func (p *Pool) backoffPolicy() backoff.Policy {
	return backoff.Policy{Initial: p.cfg.BackoffInitial, Max: p.cfg.BackoffMax, Clock: p.clock}
}
