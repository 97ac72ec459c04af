package hostpool

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgfailover/pgfailover/internal/probe"
)

// waits is what the Set knows of the calls waiting for a usable host.
type waits struct {
	// count counts the calls waiting. While it is above zero the probes
	// ask faster (see probe.Schedule). onCalls counts those of them that
	// will run on a host's calls pool (not the Reader's, nor a following
	// pool's connects): the connections opened ahead of a promotion are
	// theirs (standby.go).
	count   atomic.Int32
	onCalls atomic.Int32
	sql     waitingStatements // the statements of those calls
	// since is the clock reading (Unix nanoseconds) when count last rose
	// from zero, endedAt when it last fell to zero.
	since   atomic.Int64
	endedAt atomic.Int64
	// wake is closed, and replaced, when the first call starts waiting,
	// so that the probes ask at once instead of at their next tick.
	wake atomic.Pointer[chan struct{}]
}

func (w *waits) init() {
	wake := make(chan struct{})
	w.wake.Store(&wake)
}

// woken returns the channel the next first waiter closes.
func (w *waits) woken() <-chan struct{} { return *w.wake.Load() }

// state reports whether calls wait for a usable host, and since when.
func (w *waits) state() probe.Wait {
	if w.count.Load() == 0 {
		return probe.Wait{}
	}
	return probe.Wait{Waiting: true, Since: time.Unix(0, w.since.Load())}
}

// Waiting is how many calls wait for a usable host now (for tests).
func (s *Set) Waiting() int { return int(s.waits.count.Load()) }

// WaitStarted tells the Set that a call waits for a usable host; onCalls
// says that it will run on a host's calls pool, with statement sql ("" for
// none). The first waiter wakes every probe at once. A wait that begins
// at least sameOutage after the last one ended starts the list of waiting
// statements afresh; one that begins sooner (a call woken by a change of
// the routing state that waits again) belongs to the same outage. A call
// on a calls pool has the likeliest standby ready connections for it
// (readyForPromotion). Each WaitStarted is undone by one WaitEnded.
func (s *Set) WaitStarted(onCalls bool, sql string) {
	w := &s.waits
	if w.count.Add(1) == 1 {
		now := s.cfg.Clock.Now().UnixNano()
		w.since.Store(now)
		if now-w.endedAt.Load() >= int64(sameOutage) {
			w.sql.reset()
		}
		next := make(chan struct{})
		close(*w.wake.Swap(&next))
		s.cfg.Refresh()
	}
	if onCalls {
		w.onCalls.Add(1)
		w.sql.add(sql)
		s.readyForPromotion()
	}
}

// sameOutage is how soon after the last wait ended a new one belongs to
// the same outage (WaitStarted).
const sameOutage = time.Second

// WaitEnded undoes WaitStarted(onCalls, ...).
func (s *Set) WaitEnded(onCalls bool) {
	w := &s.waits
	if onCalls {
		w.onCalls.Add(-1)
	}
	if w.count.Add(-1) == 0 {
		w.endedAt.Store(s.cfg.Clock.Now().UnixNano())
	}
}

// maxWaitingStatements bounds the statements the connections opened ahead
// of a promotion prepare.
const maxWaitingStatements = 16

// waitingStatements lists the distinct statements of the calls waiting
// on a calls pool (WaitStarted), the first maxWaitingStatements of them, in
// the order they began to wait. The list only grows during an outage,
// and is emptied when a wait begins the next one (Set.WaitStarted).
type waitingStatements struct {
	mu   sync.Mutex
	sqls []string
	// version is the outage the list belongs to (raised each time it is
	// emptied) in its high 32 bits and the list's length in the low 32;
	// a connection's ConnState.prepared and a host's prepared are the
	// version they prepared.
	version atomic.Uint64
}

// sameList reports whether versions a and b are of one outage's list.
func sameList(a, b uint64) bool { return a>>32 == b>>32 }

// statementCount is how many statements the list had at version v.
func statementCount(v uint64) int { return int(uint32(v)) }

// withCount is the version of v's list when it held n statements.
func withCount(v uint64, n int) uint64 { return v&^(1<<32-1) | uint64(n) }

// add adds sql to the list, unless it is empty, listed or the list full.
func (w *waitingStatements) add(sql string) {
	if sql == "" || statementCount(w.version.Load()) >= maxWaitingStatements {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.sqls) < maxWaitingStatements && !slices.Contains(w.sqls, sql) {
		w.sqls = append(w.sqls, sql)
		w.version.Add(1)
	}
}

// list returns the list and its version. The list is never changed in
// place, so the slice stays valid after the list grows or is emptied.
func (w *waitingStatements) list() (uint64, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.version.Load(), w.sqls
}

// reset empties the list for the next outage.
func (w *waitingStatements) reset() {
	if statementCount(w.version.Load()) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sqls = nil
	w.version.Store((w.version.Load()>>32 + 1) << 32)
}
