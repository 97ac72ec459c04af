package failover

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/replica"
)

// lagBook turns what the probes learn of WAL positions into each
// replica's freshness: the primary's samples, and the position each
// replica has replayed. It publishes the result as an immutable lagView
// for the Reader's routing.
type lagBook struct {
	// mu guards history, primary and replayed. No I/O while held.
	mu       sync.Mutex
	history  *replica.History
	primary  string // the host whose samples history holds
	replayed map[string]replica.LSN

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
	b := &lagBook{history: replica.NewHistory(historySize), replayed: map[string]replica.LSN{}}
	b.view.Store(&lagView{changed: make(chan struct{})})
	return b
}

// observe records one probe of the host at addr.
func (b *lagBook) observe(addr string, r probeResult) {
	b.mu.Lock()
	defer b.mu.Unlock()
	old, wasReplica := b.replayed[addr]
	switch {
	case r.err != nil || r.role == hosthealth.RoleUnknown:
		// Unknown until a probe says otherwise.
		if !wasReplica {
			return // nothing known of it changes
		}
		delete(b.replayed, addr)
	case r.role == hosthealth.RolePrimary:
		delete(b.replayed, addr)
		if addr != b.primary {
			// Another primary: its positions say nothing of the old one's.
			b.history.Reset()
			b.primary = addr
		}
		last, ok := b.history.Last()
		if r.wal != 0 && (!ok || r.wal == last.LSN || r.asked.Sub(last.At) >= sampleSpacing) {
			b.history.Add(replica.Sample{LSN: r.wal, At: r.asked})
		}
	default:
		if wasReplica && old == r.wal {
			return // the same position: every bound stays as it is
		}
		b.replayed[addr] = r.wal
	}
	b.publish()
}

// raise records that the replica at addr has replayed at least wal, as
// seen on one of its connections.
func (b *lagBook) raise(addr string, wal replica.LSN) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.replayed[addr]; ok && old < wal {
		b.replayed[addr] = wal
		b.publish()
	}
}

// forget drops a host that left the topology.
func (b *lagBook) forget(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.replayed, addr)
	if addr == b.primary {
		b.history.Reset()
		b.primary = ""
	}
	b.publish()
}

// publish stores a new view when any replica's freshness changed.
// b.mu is held.
func (b *lagBook) publish() {
	next := make(map[string]replica.Candidate, len(b.replayed))
	for addr, wal := range b.replayed {
		if wal == 0 {
			continue
		}
		fresh, _ := b.history.Reached(wal)
		next[addr] = replica.Candidate{Fresh: fresh, Replayed: wal}
	}
	old := b.view.Load()
	if maps.Equal(old.replicas, next) {
		return
	}
	b.view.Store(&lagView{replicas: next, changed: make(chan struct{})})
	close(old.changed)
}
