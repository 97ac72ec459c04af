package failover

import (
	"maps"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/replica"
)

// routes is the Pool's routing state: everything a pick reads, in one
// immutable value published through Pool.routes. The writer side rebuilds
// it, under Pool.routeMu, whenever one of its inputs changes: the host
// table (setHosts), a host's health (every observation the tracker
// records) or a replica's freshness (the lag book). Readers load it once
// per pick and never lock; as grpc's picker, a published value is never
// modified. A call that waits for a host waits for moved (the Pool's) or
// changed (the Reader's, which also reads freshness) to close.
type routes struct {
	health *hosthealth.Snapshot // each host's state, role and rankings, as the tracker last published
	table  *hostTable           // the host set, by address and in order
	// hosts is what routing needs of each host, by its index in health.
	hosts []hostRoute
	// ranked holds, for each target, the hosts a call may use now, best
	// first: those health ranks usable that have a pool.
	ranked [numTargets][]*hostPool
	// replicas are the Reader's candidates, in health's order: each host
	// in a role that takes reads, that the source does not keep read
	// traffic off; cands is each one's freshness, zone tier and
	// usability.
	replicas []*hostPool
	cands    []replica.Candidate
	// fresh is each replica's freshness by address (Fresh and Replayed),
	// as the lag book last derived it. Shared with the next routes while
	// it does not change; never modified.
	fresh map[string]replica.Candidate
	// outage is what the replicas held when last looked at, as the lag
	// book last derived it, while no host is usable as the primary
	// (ranked[TargetPrimary] is empty); nil otherwise.
	outage *replica.Outage
	// moved is closed when a newer routes holds other health; changed
	// when it holds other health, freshness or outage. A new host table alone
	// closes neither: a source that repeats itself wakes nobody, and a
	// table that differs in its hosts comes with other health.
	moved, changed chan struct{}
}

// hostRoute is what routing needs of one host.
type hostRoute struct {
	pool *hostPool       // nil when its pool could not be built
	tier hosthealth.Tier // its zone tier for the Pool's target (health ranks by it)
	// fresh is the host's freshness as a replica: Fresh and Replayed,
	// zero when unknown (a primary, a replica never probed, whose last
	// probe failed or that has replayed nothing).
	fresh replica.Candidate
}

// numTargets is the number of hosthealth.Target values.
const numTargets = int(hosthealth.TargetPreferReplica) + 1

// buildRoutes builds the routing state from its inputs, for a Pool whose
// target is target and whose client is in zone. outage is kept only when
// no host is usable as the primary.
func buildRoutes(health *hosthealth.Snapshot, table *hostTable, fresh map[string]replica.Candidate, outage *replica.Outage, target hosthealth.Target, zone string) *routes {
	rs := &routes{health: health, table: table, fresh: fresh, hosts: make([]hostRoute, health.Len())}
	for i := range health.Len() {
		st := health.Host(i)
		h := table.byAddr[st.Addr]
		rs.hosts[i] = hostRoute{pool: h, tier: hosthealth.ZoneTier(target, zone, st.Zone), fresh: fresh[st.Addr]}
		if h == nil || table.noReads[st.Addr] || st.StateFor(hosthealth.TargetReplica) == hosthealth.TopologyReject {
			continue
		}
		c := fresh[st.Addr]
		c.Usable = health.Usable(i, hosthealth.TargetReplica)
		c.Tier = hosthealth.ZoneTier(hosthealth.TargetReplica, zone, st.Zone)
		c.Last = table.readLast[st.Addr]
		rs.replicas = append(rs.replicas, h)
		rs.cands = append(rs.cands, c)
	}
	for t := range numTargets {
		target := hosthealth.Target(t)
		for _, i := range health.Ranking(target) {
			if !health.Usable(i, target) {
				break // the ranking puts every usable host first
			}
			if h := rs.hosts[i].pool; h != nil {
				rs.ranked[t] = append(rs.ranked[t], h)
			}
		}
	}
	if len(rs.ranked[hosthealth.TargetPrimary]) == 0 {
		rs.outage = outage
	}
	return rs
}

// primaryUsable reports whether some host in health is usable as the
// primary and has a pool in table: whether buildRoutes would rank one for
// TargetPrimary.
func primaryUsable(health *hosthealth.Snapshot, table *hostTable) bool {
	for _, i := range health.Ranking(hosthealth.TargetPrimary) {
		if !health.Usable(i, hosthealth.TargetPrimary) {
			return false
		}
		if table.byAddr[health.Host(i).Addr] != nil {
			return true
		}
	}
	return false
}

// lookup returns the route of the host at addr.
func (rs *routes) lookup(addr string) (int, *hostRoute, bool) {
	i, ok := rs.health.Lookup(addr)
	if !ok {
		return 0, nil, false
	}
	return i, &rs.hosts[i], true
}

// holds reports whether h is one of the hosts the routes send calls to:
// false for a host that left the topology, and for the old pool of an
// address that came back.
func (rs *routes) holds(h *hostPool) bool {
	_, r, ok := rs.lookup(h.addr)
	return ok && r.pool == h
}

// usable reports whether the host at addr can take calls for target now:
// it is Healthy or Unknown.
func (rs *routes) usable(addr string, target hosthealth.Target) bool {
	i, ok := rs.health.Lookup(addr)
	return ok && rs.health.Usable(i, target)
}

// reroute rebuilds the routing state after the tracker recorded
// something, when its snapshot changed.
func (p *Pool) reroute() { p.rerouteWith(nil) }

// rerouteWith rebuilds the routing state after change, if any, has
// updated the lag book. It holds routeMu: no I/O.
func (p *Pool) rerouteWith(change func(*replica.Book) bool) {
	p.routeMu.Lock()
	n := p.rebuildLocked(nil, change != nil && change(p.lag))
	p.routeMu.Unlock()
	p.report(n)
}

// setTable makes table the host table and hosts the tracker's set, and
// drops what the lag book knows of the hosts gone, in one rebuild of the
// routing state: no routes pairs a table with another set's health. It
// holds routeMu: no I/O.
func (p *Pool) setTable(table *hostTable, hosts []hosthealth.Host, gone []string) {
	p.routeMu.Lock()
	p.tracker.SetHosts(hosts)
	forgot := false
	for _, addr := range gone {
		forgot = p.lag.Forget(addr) || forgot
	}
	n := p.rebuildLocked(table, forgot)
	p.routeMu.Unlock()
	p.report(n)
}

// rebuildLocked publishes a new routing state when an input changed:
// table (nil: the current one), the lag book (lagChanged) or the
// tracker's snapshot. routeMu is held. It returns what changed, for
// report.
func (p *Pool) rebuildLocked(table *hostTable, lagChanged bool) news {
	old := p.routes.Load()
	if table == nil {
		table = old.table
	}
	fresh, freshChanged := old.fresh, false
	if lagChanged {
		if next := p.lag.Candidates(); !maps.Equal(next, fresh) {
			fresh, freshChanged = next, true
		}
	}
	health := p.tracker.Snapshot()
	healthChanged := health != old.health
	// What the replicas hold is derived only while no primary is usable,
	// the only time the Reader reads it.
	outage, outageChanged := old.outage, false
	switch {
	case primaryUsable(health, table):
		outage, outageChanged = nil, old.outage != nil
	case lagChanged || healthChanged || old.outage == nil:
		outage, outageChanged = p.lag.Outage(), true
	}
	if !healthChanged && !freshChanged && !outageChanged && table == old.table {
		return news{} // nothing routing reads changed
	}
	next := buildRoutes(health, table, fresh, outage, p.cfg.Target, p.cfg.Zone)
	next.moved, next.changed = old.moved, old.changed
	if healthChanged {
		next.moved = make(chan struct{})
	}
	readsChanged := healthChanged || freshChanged || outageChanged
	if readsChanged {
		next.changed = make(chan struct{})
	}
	p.routes.Store(next)
	if healthChanged {
		close(old.moved)
	}
	if readsChanged {
		close(old.changed)
	}
	if !healthChanged {
		return news{}
	}
	now := p.clock.Now()
	return news{changes: diff(old, next), ended: p.trackOutage(old, next, now), at: now}
}

// firstRoutes is the routing state before any host is known.
func firstRoutes(health *hosthealth.Snapshot) *routes {
	rs := buildRoutes(health, &hostTable{}, nil, nil, hosthealth.TargetPrimary, "")
	rs.moved, rs.changed = make(chan struct{}), make(chan struct{})
	return rs
}
