package replica

import (
	"strconv"
	"time"
)

// Report is what one look at a replica found of the WAL it holds: asked
// at At (the caller's clock, before the question was sent), it had
// replayed up to Replayed and received, written and flushed up to
// Received (zero when unknown: it never streamed), and its WAL receiver
// was connected to a sender (Receiving) or not.
type Report struct {
	At        time.Time
	Replayed  LSN
	Received  LSN
	Receiving bool
}

// holds returns the end of the WAL the replica holds: what it received,
// or what it replayed when that is further (WAL it read from its own
// pg_wal or an archive).
func (r Report) holds() LSN { return max(r.Received, r.Replayed) }

// Outage is what the replicas held when last looked at, kept for the reads
// made while no primary is usable. It is immutable.
//
// A write is acknowledged once its commit record is on the primary's disk
// and, with synchronous replication (synchronous_commit on or
// remote_apply), on a synchronous standby's disk too. So the most WAL any
// replica has received, looked at after a write was acknowledged, covers
// that write when replication is synchronous and every standby that can
// acknowledge is among the replicas looked at; a replica that has replayed
// that much shows it. Without synchronous replication an acknowledged
// write may be on no replica: the most WAL the replicas hold once no WAL
// receiver is connected any more is all that any promotion can keep.
type Outage struct {
	sync    bool
	reports map[string]Report
}

// Sync reports whether the primary last probed replicated synchronously.
func (o *Outage) Sync() bool { return o.sync }

// Position returns the position a replica must have replayed to show
// every write acknowledged before since, while no primary is usable: the
// end of the most WAL any replica holds, as found by looks asked after
// since. ok is false when that cannot be said: no replica was looked at,
// one was last looked at no later than since (what it holds may predate
// the writes), or, without synchronous replication, one's WAL receiver was
// still connected (it may receive more).
func (o *Outage) Position(since time.Time) (pos LSN, ok bool) {
	for _, r := range o.reports {
		if !r.At.After(since) || r.Receiving && !o.sync {
			return 0, false
		}
		pos = max(pos, r.holds())
	}
	return pos, pos != 0
}

// Stale reports whether the replica at addr has not been looked at after
// since. A host the Outage holds no report of is not stale: it is no
// replica, or nothing is known of it now.
func (o *Outage) Stale(addr string, since time.Time) bool {
	r, ok := o.reports[addr]
	return ok && !r.At.After(since)
}

// OutageReads is what a read does that must see writes whose position
// no replica is known to have replayed, while no primary is usable.
type OutageReads uint8

const (
	// OutageReplica: it goes to a replica that has replayed the
	// Outage's Position, once there is one.
	OutageReplica OutageReads = iota
	// OutageWait: it waits for a primary.
	OutageWait
)

var outageReadsNames = [...]string{OutageReplica: "replica", OutageWait: "wait"}

// String returns the name the connection string gives the value.
func (o OutageReads) String() string {
	if int(o) < len(outageReadsNames) {
		return outageReadsNames[o]
	}
	return "OutageReads(" + strconv.Itoa(int(o)) + ")"
}
