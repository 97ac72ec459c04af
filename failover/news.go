package failover

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// news is what one rebuild of the routing state found changed, to report
// (log and record) once routeMu is released. Every observation of a host,
// a probe's, a call's or a topology source's, ends in a rebuild, so a
// change is reported once whoever noticed it.
type news struct {
	changes []hostChange
	// ended is set when the Pool's target had no usable host and has one
	// again: a failover (or a recovery) ended.
	ended *outage
	at    time.Time // when the rebuild ran, on the Pool's clock
}

// hostChange is one host's status before and after a rebuild. A host
// added has added set; one removed, removed.
type hostChange struct {
	before, after  hosthealth.HostStatus
	added, removed bool
}

// outage is a time during which the Pool's target had no usable host: it
// starts when the last usable host fails, and ends when a host is usable
// again, usually another one, found in the target's role by a probe or a
// connection.
type outage struct {
	host  *hostPool // the host whose failure started it; nil if it left the table
	since time.Time
}

// diff compares the health of two routing states. The first host table a
// Pool builds reports no hosts added.
func diff(old, next *routes) []hostChange {
	var out []hostChange
	first := len(old.table.list) == 0
	for i := range next.health.Len() {
		after := next.health.Host(i)
		j, ok := old.health.Lookup(after.Addr)
		if !ok {
			if !first {
				out = append(out, hostChange{after: after, added: true})
			}
			continue
		}
		before := old.health.Host(j)
		if before.State != after.State || before.Role != after.Role {
			out = append(out, hostChange{before: before, after: after})
		}
	}
	for i := range old.health.Len() {
		before := old.health.Host(i)
		if _, ok := next.health.Lookup(before.Addr); !ok {
			out = append(out, hostChange{before: before, removed: true})
		}
	}
	return out
}

// trackOutage starts or ends the Pool's outage after a rebuild from old to
// next. routeMu is held. It returns the outage that ended, if one did.
func (p *Pool) trackOutage(old, next *routes, now time.Time) *outage {
	target := p.cfg.Target
	hadHost, hasHost := len(old.ranked[target]) > 0, len(next.ranked[target]) > 0
	switch {
	case hadHost && !hasHost && p.outage == nil:
		o := &outage{since: now}
		// The host that failed: the one the calls were using.
		o.host = old.ranked[target][0]
		p.outage = o
	case hasHost && p.outage != nil:
		o := p.outage
		p.outage = nil
		return o
	}
	return nil
}

// report logs and records what a rebuild found. It runs once routeMu is
// released.
func (p *Pool) report(n news) {
	for _, ch := range n.changes {
		p.logHostChange(ch)
	}
	if o := n.ended; o != nil && o.host != nil {
		d := n.at.Sub(o.since)
		p.telemetry.duration.Record(context.Background(), d.Seconds(), metric.WithAttributeSet(o.host.server.set))
		p.logOutageEnded(o, d)
	}
}
