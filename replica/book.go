package replica

import (
	"maps"
	"time"
)

// Book turns what the probes learn of WAL positions into each replica's
// freshness: it keeps the primary's samples in a History, and what each
// replica holds (a Report). It is pure bookkeeping: times are passed in
// and nothing is asked of a server. It is not safe for concurrent use; the
// caller guards it.
//
// Each method that records something reports whether what the Book
// derives (Candidates, Outage) may have changed, so that the caller
// rebuilds what it derives from them only then.
type Book struct {
	history  *History
	spacing  time.Duration
	primary  string // the host whose samples history holds
	sync     bool   // the primary's last probe found synchronous replication
	replicas map[string]Report
}

// NewBook returns a Book that keeps size samples of the primary's
// position, at least spacing apart when their positions differ: while
// the probes ask every few milliseconds the history still covers
// size*spacing.
func NewBook(size int, spacing time.Duration) *Book {
	return &Book{history: NewHistory(size), spacing: spacing, replicas: map[string]Report{}}
}

// Primary records that the primary at addr stood at wal at time at, and
// whether it replicated synchronously (sync: synchronous_standby_names
// set, synchronous_commit on or remote_apply). A primary at another
// address starts the history again: its positions say nothing of the old
// one's. wal zero (unknown) adds no sample.
func (b *Book) Primary(addr string, wal LSN, at time.Time, sync bool) bool {
	delete(b.replicas, addr)
	if addr != b.primary {
		b.history.Reset()
		b.primary = addr
	}
	b.sync = sync
	last, ok := b.history.Last()
	if wal != 0 && (!ok || wal == last.LSN || at.Sub(last.At) >= b.spacing) {
		b.history.Add(Sample{LSN: wal, At: at})
	}
	return true
}

// Replica records what a probe of the replica at addr found: r.Replayed
// zero means it has replayed nothing yet.
func (b *Book) Replica(addr string, r Report) bool {
	if old, ok := b.replicas[addr]; ok && old == r {
		return false
	}
	b.replicas[addr] = r
	return true
}

// Unknown records that nothing is known of the host at addr now: its
// probe failed, or did not say its role. It stays unknown until Primary or
// Replica says otherwise.
func (b *Book) Unknown(addr string) bool {
	if _, ok := b.replicas[addr]; !ok {
		return false
	}
	delete(b.replicas, addr)
	return true
}

// Raise records that the replica at addr has replayed at least wal, as
// seen on one of its connections. A host not known as a replica is left
// as it is.
func (b *Book) Raise(addr string, wal LSN) bool {
	if old, ok := b.replicas[addr]; ok && old.Replayed < wal {
		old.Replayed = wal
		b.replicas[addr] = old
		return true
	}
	return false
}

// Look records what a look at the replica at addr on one of its
// connections found: its replay position is raised as by Raise, and the
// rest replaces what the Book held when r was asked later. A host not
// known as a replica is left as it is.
func (b *Book) Look(addr string, r Report) bool {
	old, ok := b.replicas[addr]
	if !ok {
		return false
	}
	next := old
	next.Replayed = max(old.Replayed, r.Replayed)
	if r.At.After(old.At) {
		next.At, next.Received, next.Receiving = r.At, r.Received, r.Receiving
	}
	b.replicas[addr] = next
	return next != old
}

// Reached returns the time of the newest sample of the primary at or
// before replayed (History.Reached).
func (b *Book) Reached(replayed LSN) (time.Time, bool) { return b.history.Reached(replayed) }

// Forget drops a host that left the topology.
func (b *Book) Forget(addr string) bool {
	delete(b.replicas, addr)
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
	out := make(map[string]Candidate, len(b.replicas))
	for addr, r := range b.replicas {
		if r.Replayed == 0 {
			continue
		}
		fresh, _ := b.history.Reached(r.Replayed)
		out[addr] = Candidate{Fresh: fresh, Replayed: r.Replayed}
	}
	return out
}

// Outage returns what the replicas held when last looked at, for reads
// made while no primary is usable. It is new on each call.
func (b *Book) Outage() *Outage {
	return &Outage{sync: b.sync, reports: maps.Clone(b.replicas)}
}
