package replica

import (
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// Candidate is one replica as a read sees it.
type Candidate struct {
	// Usable: the replica may take a read now: it is not known to be down
	// or in another role (one not probed yet counts), the topology source
	// does not keep reads off it, and the read has not failed on it yet.
	Usable bool
	Tier   hosthealth.Tier
	// Last: the replica takes reads only when no replica without Last is
	// eligible (topology.Member.ReadLast); its zone tier then does not
	// count.
	Last bool
	// Fresh is the time before which every acknowledged write is visible
	// on the replica (History.Reached); zero when unknown.
	Fresh time.Time
	// Replayed is the replica's last known replay position; zero when
	// unknown.
	Replayed LSN
}

// Staleness returns the upper bound on how stale c is at now, and false
// when it is unknown.
func (c *Candidate) Staleness(now time.Time) (time.Duration, bool) {
	if c.Fresh.IsZero() {
		return 0, false
	}
	return max(now.Sub(c.Fresh), 0), true
}

// Policy is what the operator asked of reads.
type Policy struct {
	// MaxLag is the greatest staleness a replica may serve reads with;
	// zero sets no gate.
	MaxLag time.Duration
	// PinAfterWrite is how long after a write a read must see it: it goes
	// to a replica that has replayed a position of the primary sampled
	// after the write, else to the primary; zero turns read-your-writes
	// off.
	PinAfterWrite time.Duration
	// OutageReads is what a read that must see writes does while no
	// primary is usable and no replica is known to have replayed them.
	OutageReads OutageReads
}

// Read is what one read brings to the decision.
type Read struct {
	// Now is the time of the read. Only the staleness gate (MaxLag) and
	// the pin after a write (LastWrite) read it: without them it may be
	// left zero.
	Now time.Time
	// LastWrite is when a write through the same pool last completed; zero
	// when none has.
	LastWrite time.Time
	// After asks for a replica that has replayed at least this position
	// (causal reads); zero asks nothing. A read with a position is not
	// pinned by LastWrite: the position says exactly what it must see.
	After LSN
}

// Reason says why a read went where it went.
type Reason uint8

const (
	// Eligible: a replica within the gate took the read.
	Eligible Reason = iota
	// Pinned: a write completed less than PinAfterWrite ago and no
	// replica was found to have replayed it (or no sample of the primary
	// taken after it could be had), so the read goes to the primary.
	Pinned
	// Lagging: replicas were usable but none within the gate (or none
	// known to have replayed the read's position), so the read goes to
	// the primary.
	Lagging
	// Unavailable: no replica was usable, so the read goes to the primary.
	Unavailable
	// Verify: a replica within the gate takes the read, but its replay
	// position is not yet known to have reached the read's position; the
	// caller checks on the replica itself before reading there.
	Verify
	// CaughtUp: a read that must see a position (after a write through the
	// pool, or a causal read) went to a replica known, from its probe or
	// from asking it, to have replayed it.
	CaughtUp
	// Waited: as CaughtUp, after waiting for the replica to replay the
	// position.
	Waited
	// OutageSync: no primary was usable, and a read that must see writes
	// went to a replica that has replayed the Outage's Position, the
	// primary last probed having replicated synchronously: the replica
	// holds every write acknowledged before the read.
	OutageSync
	// OutageAsync: as OutageSync, the primary last probed having
	// replicated asynchronously (or never been probed): the replica holds
	// what any promotion can keep, which may lack acknowledged writes.
	OutageAsync
)

// NumReasons is the number of Reason values.
const NumReasons = int(OutageAsync) + 1

// OnReplica reports whether a read routed for r went to a replica.
func (r Reason) OnReplica() bool {
	return r == Eligible || r == Verify || r == CaughtUp || r == Waited || r.InOutage()
}

// InOutage reports whether r is one of the outage reasons (OutageSync,
// OutageAsync).
func (r Reason) InOutage() bool { return r == OutageSync || r == OutageAsync }

var reasonNames = [...]string{
	Eligible:    "eligible",
	Pinned:      "pinned",
	Lagging:     "lagging",
	Unavailable: "unavailable",
	Verify:      "verify",
	CaughtUp:    "caught_up",
	Waited:      "waited",
	OutageSync:  "outage_sync",
	OutageAsync: "outage_async",
}

// String returns the reason's name as metrics show it.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// Router spreads reads round-robin over the eligible replicas of the best
// zone tier. It is safe for concurrent use; its only state is the turn
// counter.
type Router struct {
	Policy Policy
	turn   atomic.Uint32
}

// Primary is what Route returns instead of a candidate's index when the
// read goes to the primary.
const Primary = -1

// Route chooses the candidate for read r: an index into cands, or Primary
// with the reason. It allocates nothing.
func (rt *Router) Route(r Read, cands []Candidate) (int, Reason) {
	if r.After == 0 && rt.pinned(r) {
		return Primary, Pinned
	}
	// Pass one: the best key among the eligible candidates, and how many
	// share it. The key is the zone tier, after every replica known to
	// have replayed the read's position: one that would need checking
	// comes last. Keys are kept for pass two (for up to len(keys)
	// candidates, which is every real cluster).
	var keys [32]uint16
	oldest := rt.oldestFresh(r.Now)
	best, n, usable := uint16(noKey), 0, false
	for i := range cands {
		k := key(&cands[i], r.After, oldest)
		if i < len(keys) {
			keys[i] = k
		}
		switch {
		case k < best:
			best, n = k, 1
		case k == best:
			n++
		}
		usable = usable || cands[i].Usable
	}
	if best == noKey {
		if usable {
			return Primary, Lagging
		}
		return Primary, Unavailable
	}
	// Pass two: the one whose turn it is among them. With one, the turn
	// is not taken: no read writes the shared counter for nothing.
	turn := 0
	if n > 1 {
		turn = int(rt.turn.Add(1) % uint32(n))
	}
	for i := range cands {
		k := keys[i%len(keys)]
		if i >= len(keys) {
			k = key(&cands[i], r.After, oldest)
		}
		if k != best {
			continue
		}
		if turn > 0 {
			turn--
			continue
		}
		if best >= verifyKey {
			return i, Verify
		}
		return i, Eligible
	}
	return Primary, Unavailable // not reached: pass one counted n
}

const (
	lastKey   = 16             // the key of a Last replica: after every zone tier
	verifyKey = 256            // added to the tier of a replica whose position needs checking
	noKey     = math.MaxUint16 // not eligible
)

// key orders the candidates for a read asking for position after:
// noKey for one that may not take it, else its tier, plus verifyKey when
// the replica is not known to have replayed after. oldest is the oldest
// Fresh the gate admits (zero: no gate).
func key(c *Candidate, after LSN, oldest time.Time) uint16 {
	if !c.Usable || !oldest.IsZero() && (c.Fresh.IsZero() || c.Fresh.Before(oldest)) {
		return noKey
	}
	k := uint16(c.Tier)
	if c.Last {
		k = lastKey
	}
	if after != 0 && c.Replayed < after {
		k += verifyKey
	}
	return k
}

// oldestFresh returns the oldest Fresh time the gate admits at now, or
// the zero time when no gate is set.
func (rt *Router) oldestFresh(now time.Time) time.Time {
	if rt.Policy.MaxLag == 0 {
		return time.Time{}
	}
	return now.Add(-rt.Policy.MaxLag)
}

// Pinned reports whether read r is pinned by a write through the pool:
// one completed less than PinAfterWrite before it.
func (rt *Router) Pinned(r Read) bool { return rt.pinned(r) }

func (rt *Router) pinned(r Read) bool {
	return rt.Policy.PinAfterWrite > 0 && !r.LastWrite.IsZero() && r.Now.Sub(r.LastWrite) < rt.Policy.PinAfterWrite
}

// Eligible reports whether c may serve a read at now that asks for no
// position: whether Route would consider it.
func (rt *Router) Eligible(c *Candidate, now time.Time) bool {
	return key(c, 0, rt.oldestFresh(now)) != noKey
}
