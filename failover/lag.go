package failover

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/replica"
)

// lagBook feeds what the probes learn of WAL positions to a replica.Book
// and publishes each replica's freshness as an immutable lagView for the
// Reader's routing.
type lagBook struct {
	// mu guards book. No I/O while held.
	mu   sync.Mutex
	book *replica.Book

	view atomic.Pointer[lagView]
}

// lagView is what routing reads: each replica's freshness, by address.
// Replicas never probed, whose last probe failed, or that have replayed
// nothing are absent.
type lagView struct {
	replicas map[string]replica.Candidate // Fresh and Replayed only
	changed  chan struct{}                // closed when a newer view is published
}

// historySize is how many primary samples are kept, and sampleSpacing the
// least time between two kept samples whose positions differ. While calls
// wait for a host every server is probed every few milliseconds; the
// spacing keeps the history covering at least historySize*sampleSpacing
// (about 13 s) even then, and the whole probe interval times historySize
// otherwise.
const (
	historySize   = 256
	sampleSpacing = 50 * time.Millisecond
)

func newLagBook() *lagBook {
	b := &lagBook{book: replica.NewBook(historySize, sampleSpacing)}
	b.view.Store(&lagView{changed: make(chan struct{})})
	return b
}

// probed records one probe of the host at addr.
func (b *lagBook) probed(addr string, r probeResult) {
	b.apply(func(book *replica.Book) bool {
		switch {
		case r.err != nil || r.role == hosthealth.RoleUnknown:
			return book.Unknown(addr)
		case r.role == hosthealth.RolePrimary:
			return book.Primary(addr, r.wal, r.asked)
		}
		return book.Replica(addr, r.wal)
	})
}

// raise records that the replica at addr has replayed at least wal, as
// seen on one of its connections.
func (b *lagBook) raise(addr string, wal replica.LSN) {
	b.apply(func(book *replica.Book) bool { return book.Raise(addr, wal) })
}

// forget drops a host that left the topology.
func (b *lagBook) forget(addr string) {
	b.apply(func(book *replica.Book) bool { return book.Forget(addr) })
}

// apply runs change on the book and, when it says the freshness may have
// changed, stores a new view if any replica's freshness did.
func (b *lagBook) apply(change func(*replica.Book) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !change(b.book) {
		return
	}
	next := b.book.Candidates()
	old := b.view.Load()
	if maps.Equal(old.replicas, next) {
		return
	}
	b.view.Store(&lagView{replicas: next, changed: make(chan struct{})})
	close(old.changed)
}
