package failover

import (
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/telemetry"
)

// routes is the Pool's routing value: everything host state offers a
// pick (the hosts' health and rankings, the host table, the replicas'
// freshness), published by the Pool's owner of host state
// (internal/hoststate) and read lock-free through Pool.state.Routes.
type routes = hoststate.Routes[hostPool]

// hostTable is the set of hosts the Pool uses, by address and in order.
type hostTable = hoststate.Table[hostPool]

// observe hands one observation of host h to the Pool's host state and
// acts on what it changed: it logs and records the news, and closes the
// pooled connections of a host whose server now stands in a role the
// target does not accept, so that no caller keeps writing to a demoted
// primary (only on the change, which keeps pool_min_conns from
// reconnecting to a replica over and over). Every observation of a host
// goes through here.
func (p *Pool) observe(h *hostPool, ob hoststate.Observation) hoststate.Result[hostPool] {
	ob.Addr = h.addr
	res := p.state.Observe(ob)
	p.report(res.News)
	if res.Demoted {
		p.telemetry.Closed(h.server, telemetry.ClosedDemoted, int(h.pool.Stat().TotalConns()))
		h.pool.Reset()
		p.follower().demoted(h.addr)
	}
	return res
}

// report logs and records what a publication of the routes changed.
func (p *Pool) report(n hoststate.News[hostPool]) {
	for _, ch := range n.Changes {
		p.log.HostChange(ch)
	}
	if o := n.Ended; o != nil && o.Host != nil {
		d := n.At.Sub(o.Since)
		p.telemetry.FailoverEnded(o.Host.server, d)
		p.log.FailoverEnded(o.Host.addr, p.firstRanked(), d)
	}
}

// firstRanked is the address of the best host for the Pool's target now,
// "" when none is usable.
func (p *Pool) firstRanked() string {
	if rs := p.state.Routes(); len(rs.Ranked[p.cfg.Target]) > 0 {
		return rs.Ranked[p.cfg.Target][0].addr
	}
	return ""
}

// status returns what is known about the host at addr.
func (p *Pool) status(addr string) (hosthealth.HostStatus, bool) {
	return p.state.Routes().Status(addr)
}
