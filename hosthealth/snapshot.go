package hosthealth

import (
	"slices"
	"strings"
	"time"
)

// HostSpec is one server the client may use, as a topology source describes
// it (the connection string, or a cluster manager such as Patroni): what
// is asked for, where HostStatus is what was observed.
type HostSpec struct {
	Addr string // host:port; the host's identity
	Zone string // zone configured or announced for the host; "" if none
	// Claimed is the role the topology source says the host has. It is a
	// hint: a role the server reports itself replaces it.
	Claimed Role
}

// HostStatus is what is known about one host at a moment. It holds
// facts only; how the host ranks for a given target comes from
// [HostStatus.StateFor] and [Snapshot.Ranking].
type HostStatus struct {
	Addr string
	// State is the host's reachability: Healthy (the server answered),
	// Unknown, TransientReject or TransportError. It is never
	// TopologyReject; that depends on the target (see StateFor).
	State   State
	Role    Role      // last role the server reported; kept across failures
	Claimed Role      // role the topology source claims; a hint
	Zone    string    // last known zone: configured, or later advertised; "" if none
	Since   time.Time // when State or Role last changed
	// Server is the server the host's name last led to, as that server
	// names itself (its address and port); "" until one said. Behind a
	// name that moves (an endpoint, a Service, a DNS name) it changes
	// while Addr stays.
	Server string
}

// role is the role to rank the host by: the server's own report, else the
// topology source's claim.
func (h HostStatus) role() Role {
	if h.Role != RoleUnknown {
		return h.Role
	}
	return h.Claimed
}

// StateFor is the state the host ranks with for target t: its State, except
// that a Healthy host (its server answered), or an Unknown one whose role
// is known (reported or claimed), ranks as TopologyReject when t does not
// accept its role. A server that answered without telling its role, and
// with no role claimed for it, is not accepted by any target. A host in
// TransientReject or TransportError ranks with that state whatever its
// role.
func (h HostStatus) StateFor(t Target) State {
	switch h.State {
	case Healthy:
		if !t.Accepts(h.role()) {
			return TopologyReject
		}
	case Unknown:
		if r := h.role(); r != RoleUnknown && !t.Accepts(r) {
			return TopologyReject
		}
	}
	return h.State
}

// Options configure the state New returns, and every state folded from it.
type Options struct {
	Zone  string // the client's zone; "" means unset
	Clock Clock  // reads the time for HostStatus.Since; nil means the system clock
}

// Clock tells the time. A Pool passes the clock it runs on; tests pass a
// fake one.
type Clock interface{ Now() time.Time }

// New returns the state of hosts, every one Unknown, ranked for every
// target. The slice is copied.
//
// A Snapshot is a value: the Observe methods and SetHosts return the state
// that follows from it, and never modify it. They return the receiver
// itself when the observation changes nothing, so a caller can tell a
// change by comparing pointers. Whoever folds observations into a state
// keeps the current one and serializes its folds; the Snapshot has no lock
// of its own.
func New(hosts []HostSpec, opts Options) *Snapshot {
	s := &Snapshot{zone: opts.Zone, now: time.Now}
	if opts.Clock != nil {
		s.now = opts.Clock.Now
	}
	return s.next(s.statuses(hosts), false)
}

// SetHosts returns the state with hosts as the tracked set, in the given
// order (which breaks ties in the rankings). A host already tracked keeps
// its state, role and advertised zone, and takes the new claimed role; a
// configured zone in hosts replaces the known one. A new host starts
// Unknown. Hosts missing from hosts are forgotten.
func (s *Snapshot) SetHosts(hosts []HostSpec) *Snapshot {
	hs := s.statuses(hosts)
	if slices.Equal(hs, s.hosts) {
		return s // a source that repeats itself changes nothing
	}
	return s.next(hs, s.outage)
}

// statuses builds the host list for hosts, carrying over what s knows.
func (s *Snapshot) statuses(hosts []HostSpec) []HostStatus {
	now := s.now()
	hs := make([]HostStatus, 0, len(hosts))
	for _, h := range hosts {
		if slices.ContainsFunc(hs, func(x HostStatus) bool { return x.Addr == h.Addr }) {
			continue // the first entry of an address wins
		}
		st := HostStatus{Addr: h.Addr, State: Unknown, Zone: h.Zone, Claimed: h.Claimed, Since: now}
		if i, ok := s.index[h.Addr]; ok {
			st = s.hosts[i]
			st.Claimed = h.Claimed
			if h.Zone != "" {
				st.Zone = h.Zone
			}
		}
		hs = append(hs, st)
	}
	return hs
}

// ObserveConnect returns the state after a connect, probe or query on addr
// succeeded and the server reported role. The host becomes Healthy.
//
// A connect that brings a host back from a failure (TransientReject or
// TransportError) ends the current outage. One on a host that was only
// Unknown does not: the outage's own reset makes hosts of other zones
// Unknown, and their next probe is no recovery.
func (s *Snapshot) ObserveConnect(addr string, role Role) *Snapshot {
	if i, ok := s.index[addr]; !ok || (s.hosts[i].State == Healthy && s.hosts[i].Role == role) {
		return s // nothing changes: a connect that recovers nothing leaves an outage as it is
	}
	return s.update(addr, func(h *HostStatus, outage bool) bool {
		recovered := h.State > Unknown
		s.set(h, Healthy, role)
		return outage && !recovered
	})
}

// ObserveZone returns the state after the server at addr advertised zone.
// An empty zone means nothing was advertised and changes nothing: the
// known zone, configured or advertised earlier, stays until a different
// one is advertised.
func (s *Snapshot) ObserveZone(addr, zone string) *Snapshot {
	if i, ok := s.index[addr]; !ok || zone == "" || s.hosts[i].Zone == zone {
		return s
	}
	return s.update(addr, func(h *HostStatus, outage bool) bool {
		h.Zone = zone
		return outage
	})
}

// ObserveServer returns the state after a connection to addr reached the
// server that names itself server. An empty name changes nothing.
func (s *Snapshot) ObserveServer(addr, server string) *Snapshot {
	if i, ok := s.index[addr]; !ok || server == "" || s.hosts[i].Server == server {
		return s
	}
	return s.update(addr, func(h *HostStatus, outage bool) bool {
		h.Server = server
		return outage
	})
}

// ObserveFailure returns the state after a failure on addr classified as c
// (see Classify). Transient makes the host TransientReject and Transport
// makes it TransportError; both keep its last known role. Topology means
// the server answered but refused the work for its role, which for this
// library is a write refused by a read-only server: the host is reachable
// (Healthy) and in the replica role. Report a role the server stated with
// ObserveConnect instead. Terminal and NotFailover are not about the host
// and change nothing.
//
// A failure while no outage is under way, a Topology one included, starts
// one. At that moment
// every Healthy host known to be in another zone than the client's is reset
// to Unknown, so that a walk tries local hosts again before settling on a
// remote one.
func (s *Snapshot) ObserveFailure(addr string, c Class) *Snapshot {
	var want State
	role := RoleUnknown // unchanged
	switch c {
	case Topology:
		want, role = Healthy, RoleReplica
	case Transient:
		want = TransientReject
	case Transport:
		want = TransportError
	default:
		return s
	}
	if s.outage {
		if i, ok := s.index[addr]; !ok || (s.hosts[i].State == want && (role == RoleUnknown || s.hosts[i].Role == role)) {
			return s
		}
	}
	return s.update(addr, func(h *HostStatus, outage bool) bool {
		if role == RoleUnknown {
			role = h.Role
		}
		s.set(h, want, role)
		return true
	})
}

// update returns the state with change applied to the host at addr. change
// returns whether an outage is under way afterwards. A new outage resets
// the Healthy hosts of other zones.
func (s *Snapshot) update(addr string, change func(h *HostStatus, outage bool) bool) *Snapshot {
	i, ok := s.index[addr]
	if !ok {
		return s
	}
	hs := slices.Clone(s.hosts)
	outage := change(&hs[i], s.outage)
	if hs[i] == s.hosts[i] && outage == s.outage {
		return s
	}
	if outage && !s.outage {
		for j := range hs {
			if j != i && hs[j].State == Healthy && s.tierOf(TargetAny, hs[j].Zone) == TierOther {
				s.set(&hs[j], Unknown, hs[j].Role)
			}
		}
	}
	return s.next(hs, outage)
}

// set moves h to state and role, stamping Since when either changes. h is
// in a host slice not yet published.
func (s *Snapshot) set(h *HostStatus, state State, role Role) {
	if h.State != state || h.Role != role {
		h.State, h.Role = state, role
		h.Since = s.now()
	}
}

// tierOf returns the tier, for target, of a host whose known zone is zone.
func (s *Snapshot) tierOf(target Target, zone string) Tier { return ZoneTier(target, s.zone, zone) }

// ZoneTier returns the tier, for target, of a host in hostZone seen from a
// client in clientZone ("" for unknown or unset).
func ZoneTier(target Target, clientZone, hostZone string) Tier {
	switch {
	case target == TargetPrimary || clientZone == "":
		// Writes follow the primary wherever it is, and a client with no
		// zone has no preference.
		return TierSame
	case hostZone == "":
		return TierUnknown
	case strings.EqualFold(hostZone, clientZone):
		return TierSame
	default:
		return TierOther
	}
}

// next returns the state holding hs, ranked for every target. hs must not
// be modified afterwards.
func (s *Snapshot) next(hs []HostStatus, outage bool) *Snapshot {
	n := &Snapshot{zone: s.zone, now: s.now, hosts: hs, outage: outage, index: make(map[string]int, len(hs))}
	for i, h := range hs {
		n.index[h.Addr] = i
	}
	for target := range n.order {
		n.order[target], n.states[target] = n.rank(Target(target))
	}
	return n
}

// rank returns the host indexes of s sorted by (ranking state, tier) for
// target, keeping the given order among equals, and each host's ranking
// state.
func (s *Snapshot) rank(target Target) (order []int, states []State) {
	hs := s.hosts
	states = make([]State, len(hs))
	demotePrimaries := false
	for i, h := range hs {
		states[i] = h.StateFor(target)
		if target == TargetPreferReplica && h.role() == RoleReplica && states[i] <= Unknown {
			demotePrimaries = true
		}
	}
	// There are only numStates*numTiers distinct keys, so a counting sort
	// does it in linear time, and it is stable by construction.
	var start [numStates*numTiers + 1]int
	keys := make([]int, len(hs))
	for i, h := range hs {
		if demotePrimaries && h.role() == RolePrimary {
			states[i] = TopologyReject
		}
		keys[i] = int(states[i])*numTiers + int(s.tierOf(target, h.Zone))
		start[keys[i]+1]++
	}
	for k := 1; k < len(start); k++ {
		start[k] += start[k-1]
	}
	order = make([]int, len(hs))
	for i, k := range keys {
		order[start[k]] = i
		start[k]++
	}
	return order, states
}

// numTargets is the number of defined targets.
const numTargets = int(TargetPreferReplica) + 1

// Snapshot is an immutable view of every host, with each target's ranking
// already computed: the state that New and the observations folded into it
// since give. Host indexes are positions in this snapshot only: the next
// snapshot may hold other hosts, so keep addresses, not indexes, across
// snapshots.
type Snapshot struct {
	zone   string           // the client's zone (Options.Zone)
	now    func() time.Time // the clock (Options.Clock)
	hosts  []HostStatus     // in the order given to SetHosts
	index  map[string]int
	order  [numTargets][]int
	states [numTargets][]State
	outage bool // a failure was seen and no host recovered since
}

// Len returns the number of hosts.
func (s *Snapshot) Len() int { return len(s.hosts) }

// Host returns what is known about host i.
func (s *Snapshot) Host(i int) HostStatus { return s.hosts[i] }

// Hosts returns a copy of every host's status, in the order given to
// SetHosts.
func (s *Snapshot) Hosts() []HostStatus { return slices.Clone(s.hosts) }

// Lookup returns the index of the host at addr.
func (s *Snapshot) Lookup(addr string) (int, bool) {
	i, ok := s.index[addr]
	return i, ok
}

// Ranking returns every host index, best first for target: by
// (State(i, target), tier), ties in the given order.
//
// The slice is shared and must not be modified.
func (s *Snapshot) Ranking(target Target) []int { return s.order[target] }

// Pick returns the index of the best host for target, or -1 when there are
// no hosts. The best host may still be unusable; check its StateFor when
// that matters.
func (s *Snapshot) Pick(target Target) int {
	if o := s.order[target]; len(o) > 0 {
		return o[0]
	}
	return -1
}

// State returns the state host i ranks with for target: its StateFor,
// except that under TargetPreferReplica a primary ranks as TopologyReject
// while any replica is Healthy or Unknown for that target. A host whose
// State is Healthy or Unknown can take a call now; any other is left to the
// probes.
func (s *Snapshot) State(i int, target Target) State { return s.states[target][i] }

// Usable reports whether host i can take a call for target now: its State
// is Healthy or Unknown.
func (s *Snapshot) Usable(i int, target Target) bool { return s.states[target][i] <= Unknown }
