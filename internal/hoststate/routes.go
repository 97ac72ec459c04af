package hoststate

import (
	"sync/atomic"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/replica"
)

// NumTargets is the number of hosthealth.Target values.
const NumTargets = int(hosthealth.TargetPreferReplica) + 1

// Table is the set of hosts a Pool uses, by address and in order: the
// connection string's hosts first, then those only a topology source
// named. T is the Pool's per-host value (its pools); a host whose T could
// not be built is in the host set but not in the Table. A published Table
// is never modified.
type Table[T any] struct {
	ByAddr map[string]*T
	List   []*T
	// NoReads holds hosts the topology source asks to keep read traffic
	// off.
	NoReads map[string]bool
	// ReadLast holds hosts the Reader uses only when no other replica
	// qualifies.
	ReadLast map[string]bool
}

// Routes is everything host state offers a pick, in one immutable value:
// the hosts' health and rankings, the host table, each replica's
// freshness. A published Routes is never modified.
type Routes[T any] struct {
	Health *hosthealth.Snapshot // each host's state, role and rankings
	Table  *Table[T]
	// Hosts is what routing needs of each host, by its index in Health.
	Hosts []Route[T]
	// Ranked holds, for each target, the hosts a call may use now, best
	// first: those Health ranks usable that have a T.
	Ranked [NumTargets][]*T
	// Replicas are the Reader's candidates, in Health's order: each host
	// in a role that takes reads, that the source does not keep read
	// traffic off. Cands is each one's freshness, zone tier and
	// usability.
	Replicas []*T
	Cands    []replica.Candidate
	// Fresh is each replica's freshness by address, as the lag book last
	// derived it. Shared with the next Routes while it does not change.
	Fresh map[string]replica.Candidate
	// Outage is what the replicas held when last looked at, while no host
	// is usable as the primary (Ranked[TargetPrimary] is empty); nil
	// otherwise.
	Outage *replica.Outage
	// Moved is closed when a newer Routes holds other health or ranks
	// other hosts; Changed when it holds other health, rankings,
	// candidates, freshness or Outage. A table that repeats the last one
	// closes neither: a source that repeats itself wakes nobody.
	Moved, Changed chan struct{}

	// epochs holds each host's epoch counter, by address. The counters
	// are the Owner's: it alone adds to them, under its lock.
	epochs map[string]*atomic.Uint32
}

// Route is what routing needs of one host.
type Route[T any] struct {
	Entry *T              // the table's entry for it; nil when it could not be built
	Tier  hosthealth.Tier // its zone tier for the Pool's target
	// Fresh is the host's freshness as a replica: zero when unknown (a
	// primary, a replica never probed, whose last probe failed or that has
	// replayed nothing).
	Fresh replica.Candidate
}

// build builds the Routes of health, table and fresh, for a Pool whose
// target is target and whose client is in zone. Outage, the channels and
// the epochs are the caller's to set.
func build[T any](health *hosthealth.Snapshot, table *Table[T], fresh map[string]replica.Candidate, target hosthealth.Target, zone string) *Routes[T] {
	rs := &Routes[T]{Health: health, Table: table, Fresh: fresh, Hosts: make([]Route[T], health.Len())}
	for i := range health.Len() {
		st := health.Host(i)
		h := table.ByAddr[st.Addr]
		rs.Hosts[i] = Route[T]{Entry: h, Tier: hosthealth.ZoneTier(target, zone, st.Zone), Fresh: fresh[st.Addr]}
		if h == nil || table.NoReads[st.Addr] || st.StateFor(hosthealth.TargetReplica) == hosthealth.TopologyReject {
			continue
		}
		c := fresh[st.Addr]
		c.Usable = health.Usable(i, hosthealth.TargetReplica)
		c.Tier = hosthealth.ZoneTier(hosthealth.TargetReplica, zone, st.Zone)
		c.Last = table.ReadLast[st.Addr]
		rs.Replicas = append(rs.Replicas, h)
		rs.Cands = append(rs.Cands, c)
	}
	for t := range NumTargets {
		target := hosthealth.Target(t)
		for _, i := range health.Ranking(target) {
			if !health.Usable(i, target) {
				break // the ranking puts every usable host first
			}
			if h := rs.Hosts[i].Entry; h != nil {
				rs.Ranked[t] = append(rs.Ranked[t], h)
			}
		}
	}
	return rs
}

// Lookup returns the index and route of the host at addr.
func (rs *Routes[T]) Lookup(addr string) (int, *Route[T], bool) {
	i, ok := rs.Health.Lookup(addr)
	if !ok {
		return 0, nil, false
	}
	return i, &rs.Hosts[i], true
}

// Holds reports whether h, the T of the host at addr, is one the Routes
// send calls to: false for a host that left the set, and for the old T of
// an address that came back.
func (rs *Routes[T]) Holds(addr string, h *T) bool {
	_, r, ok := rs.Lookup(addr)
	return ok && r.Entry == h
}

// Usable reports whether the host at addr can take calls for target now:
// it is Healthy or Unknown.
func (rs *Routes[T]) Usable(addr string, target hosthealth.Target) bool {
	i, ok := rs.Health.Lookup(addr)
	return ok && rs.Health.Usable(i, target)
}

// Status returns what is known about the host at addr.
func (rs *Routes[T]) Status(addr string) (hosthealth.HostStatus, bool) {
	if i, ok := rs.Health.Lookup(addr); ok {
		return rs.Health.Host(i), true
	}
	return hosthealth.HostStatus{}, false
}
