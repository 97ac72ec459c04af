package failover

import (
	"slices"
	"sync"
	"sync/atomic"
)

// maxWaitingStatements bounds the statements the connections opened ahead
// of a promotion prepare.
const maxWaitingStatements = 16

// waitingStatements lists the distinct statements of the calls waiting
// on a calls pool (call.sql), the first maxWaitingStatements of them, in
// the order they began to wait. The list only grows during an outage,
// and is emptied when a wait begins the next one (Pool.waitStarted).
type waitingStatements struct {
	mu   sync.Mutex
	sqls []string
	// version is the outage the list belongs to (raised each time it is
	// emptied) in its high 32 bits and the list's length in the low 32;
	// a connection's connState.prepared and a host's prepared are the
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
