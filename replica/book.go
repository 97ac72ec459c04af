package replica

import "time"

// Book turns what the probes learn of WAL positions into each replica's
// freshness: it keeps the primary's samples in a History, and the
// position each replica has replayed. It is pure bookkeeping: times are
// passed in and nothing is asked of a server. It is not safe for
// concurrent use; the caller guards it.
//
// Each method that records something reports whether the replicas'
// freshness may have changed, so that the caller rebuilds what it derives
// from Candidates only then.
type Book struct {
	history  *History
	spacing  time.Duration
	primary  string // the host whose samples history holds
	replayed map[string]LSN
}

// NewBook returns a Book that keeps size samples of the primary's
// position, at least spacing apart when their positions differ: while
// the probes ask every few milliseconds the history still covers
// size*spacing.
func NewBook(size int, spacing time.Duration) *Book {
	return &Book{history: NewHistory(size), spacing: spacing, replayed: map[string]LSN{}}
}

// Primary records that the primary at addr stood at wal at time at. A
// primary at another address starts the history again: its positions say
// nothing of the old one's. wal zero (unknown) adds no sample.
func (b *Book) Primary(addr string, wal LSN, at time.Time) bool {
	delete(b.replayed, addr)
	if addr != b.primary {
		b.history.Reset()
		b.primary = addr
	}
	last, ok := b.history.Last()
	if wal != 0 && (!ok || wal == last.LSN || at.Sub(last.At) >= b.spacing) {
		b.history.Add(Sample{LSN: wal, At: at})
	}
	return true
}

// Replica records that the replica at addr has replayed up to wal (zero:
// nothing yet).
func (b *Book) Replica(addr string, wal LSN) bool {
	if old, ok := b.replayed[addr]; ok && old == wal {
		return false // the same position: every bound stays as it is
	}
	b.replayed[addr] = wal
	return true
}

// Unknown records that nothing is known of the host at addr now: its
// probe failed, or did not say its role. It stays unknown until Primary or
// Replica says otherwise.
func (b *Book) Unknown(addr string) bool {
	if _, ok := b.replayed[addr]; !ok {
		return false
	}
	delete(b.replayed, addr)
	return true
}

// Raise records that the replica at addr has replayed at least wal, as
// seen on one of its connections. A host not known as a replica is left
// as it is.
func (b *Book) Raise(addr string, wal LSN) bool {
	if old, ok := b.replayed[addr]; ok && old < wal {
		b.replayed[addr] = wal
		return true
	}
	return false
}

// Forget drops a host that left the topology.
func (b *Book) Forget(addr string) bool {
	delete(b.replayed, addr)
	if addr == b.primary {
		b.history.Reset()
		b.primary = ""
	}
	return true
}

// Candidates returns each replica's freshness by address: Fresh and
// Replayed set, Usable and Tier left for the caller. Replicas that have
// replayed nothing are absent. The map is new on each call.
func (b *Book) Candidates() map[string]Candidate {
	out := make(map[string]Candidate, len(b.replayed))
	for addr, wal := range b.replayed {
		if wal == 0 {
			continue
		}
		fresh, _ := b.history.Reached(wal)
		out[addr] = Candidate{Fresh: fresh, Replayed: wal}
	}
	return out
}
