package failover

import (
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/replica"
)

// What the probes and the Reader's checks learn of WAL positions goes to
// the Pool's replica.Book (guarded by routeMu), and a change of any
// replica's freshness, or of what the replicas hold while no primary is
// usable, rebuilds the routing state (routes.go).

// historySize is how many primary samples are kept, and sampleSpacing the
// least time between two kept samples whose positions differ. While calls
// wait for a host every server may be probed every few milliseconds; the
// spacing keeps the history covering at least historySize*sampleSpacing
// (about 13 s) even then, and the whole probe interval times historySize
// otherwise.
const (
	historySize   = 256
	sampleSpacing = 50 * time.Millisecond
)

// probedLag records what one probe of the host at addr says of its WAL
// position.
func (p *Pool) probedLag(addr string, r probeResult) {
	p.rerouteWith(func(book *replica.Book) bool {
		switch {
		case r.err != nil || r.role == hosthealth.RoleUnknown:
			return book.Unknown(addr) // unknown until a probe says otherwise
		case r.role == hosthealth.RolePrimary:
			if p.reader != nil { // nil only in tests of the routing alone
				p.reader.sampler.Observe(addr, replica.Sample{LSN: r.wal, At: r.asked})
			}
			return book.Primary(addr, r.wal, r.asked, r.sync)
		}
		return book.Replica(addr, replica.Report{At: r.asked, Replayed: r.wal, Received: r.received, Receiving: r.receiving})
	})
}

// raiseLag records that the replica at addr has replayed at least wal, as
// seen on one of its connections.
func (p *Pool) raiseLag(addr string, wal replica.LSN) {
	p.rerouteWith(func(book *replica.Book) bool { return book.Raise(addr, wal) })
}

// looked records what a look at the replica at addr on one of its
// connections found (Reader.look).
func (p *Pool) looked(addr string, r replica.Report) {
	p.rerouteWith(func(book *replica.Book) bool { return book.Look(addr, r) })
}
