package lograte

import (
	"sync"
	"time"

	"github.com/pgfailover/pgfailover/internal/clock"
)

// Limiter lets through at most one line per key each Every. The zero
// value is not usable; call New.
type Limiter struct {
	every time.Duration
	clock clock.Clock

	mu   sync.Mutex
	keys map[string]*entry
}

type entry struct {
	last       time.Time // when a line with this key last passed
	suppressed int       // lines held back since then
}

// maxKeys bounds the memory a Limiter keeps: the Pool's keys name a host
// and a message, and a Limiter that reaches this many keys forgets them
// all and starts afresh.
const maxKeys = 1024

// New returns a Limiter that lets one line per key through each every, on
// clock c.
func New(every time.Duration, c clock.Clock) *Limiter {
	return &Limiter{every: every, clock: c, keys: make(map[string]*entry)}
}

// Allow reports whether a line with key may be logged now. When it may,
// suppressed is the number of lines with that key held back since the
// last one that passed.
func (l *Limiter) Allow(key string) (ok bool, suppressed int) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.keys[key]
	if e == nil {
		if len(l.keys) >= maxKeys {
			clear(l.keys)
		}
		l.keys[key] = &entry{last: now}
		return true, 0
	}
	if now.Sub(e.last) < l.every {
		e.suppressed++
		return false, 0
	}
	suppressed = e.suppressed
	e.last, e.suppressed = now, 0
	return true, suppressed
}

// Forget drops what l keeps of key, so that the next line with it passes
// at once: a run of warnings has ended (the trouble is over), and a new
// one is news. Lines held back in the run that ended are not counted in
// the next one.
func (l *Limiter) Forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.keys, key)
}
