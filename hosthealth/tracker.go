package hosthealth

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Host is one server the client may use, as a topology source describes
// it: the connection string, or a cluster manager such as Patroni.
type Host struct {
	Addr string // host:port; the host's identity
	Zone string // zone configured or announced for the host; "" if none
	// Claimed is the role the topology source says the host has. It is a
	// hint: a role the server reports itself replaces it.
	Claimed Role
}

// HostStatus is what the tracker knows about one host at a moment. It holds
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
// that a host whose server answered, or whose role is known, ranks as
// TopologyReject when t does not accept its role. A server that answered
// without telling its role is not accepted by any target.
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

// Options configure a Tracker.
type Options struct {
	Zone string           // the client's zone; "" means unset
	Now  func() time.Time // clock for HostStatus.Since; nil means time.Now
}

// Tracker folds observations about a changing set of hosts into rankings,
// one per target.
//
// Hosts are identified by address. [Tracker.SetHosts] replaces the set: a
// host that stays keeps what was learnt about it, a new one starts Unknown.
// Observations about an address the tracker does not hold are ignored (the
// host was removed while a call on it was in flight).
//
// Readers take a [Snapshot], which never changes and never blocks. Writers
// (SetHosts and the Observe methods) take a mutex, build a new snapshot with
// every target's ranking precomputed, publish it, and close the previous
// snapshot's Changed channel. Observations that change nothing return
// without locking or allocating.
//
// All methods are safe for concurrent use.
type Tracker struct {
	zone string
	now  func() time.Time

	// mu serializes writers: it guards the load-modify-publish of snap so
	// that two observations never build on the same old snapshot and lose
	// one another. Readers do not take it. No I/O while held.
	mu sync.Mutex
	// snap is the current view. A published snapshot is never modified.
	snap atomic.Pointer[Snapshot]
}

// NewTracker returns a Tracker for hosts, every one Unknown. The slice is
// copied.
func NewTracker(hosts []Host, opts Options) *Tracker {
	t := &Tracker{zone: opts.Zone, now: opts.Now}
	if t.now == nil {
		t.now = time.Now
	}
	t.publish(t.statuses(hosts, nil), false)
	return t
}

// Snapshot returns the current view of every host.
func (t *Tracker) Snapshot() *Snapshot { return t.snap.Load() }

// SetHosts makes hosts the tracked set, in the given order (which breaks
// ties in the rankings). A host already tracked keeps its state, role and
// advertised zone, and takes the new claimed role; a configured zone in
// hosts replaces the known one. A new host starts Unknown. Hosts missing
// from hosts are forgotten.
func (t *Tracker) SetHosts(hosts []Host) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.snap.Load()
	hs := t.statuses(hosts, s)
	if slices.Equal(hs, s.hosts) {
		return // a source that repeats itself wakes nobody
	}
	t.publish(hs, s.outage)
}

// statuses builds the host list for hosts, carrying over what old knows.
func (t *Tracker) statuses(hosts []Host, old *Snapshot) []HostStatus {
	now := t.now()
	hs := make([]HostStatus, 0, len(hosts))
	for _, h := range hosts {
		if slices.ContainsFunc(hs, func(x HostStatus) bool { return x.Addr == h.Addr }) {
			continue // the first entry of an address wins
		}
		st := HostStatus{Addr: h.Addr, State: Unknown, Zone: h.Zone, Claimed: h.Claimed, Since: now}
		if old != nil {
			if i, ok := old.index[h.Addr]; ok {
				st = old.hosts[i]
				st.Claimed = h.Claimed
				if h.Zone != "" {
					st.Zone = h.Zone
				}
			}
		}
		hs = append(hs, st)
	}
	return hs
}

// ObserveConnect records that a connect, probe or query on addr succeeded
// and that the server reported role. The host becomes Healthy.
//
// A connect that brings a host back from a failure (TransientReject or
// TransportError) ends the current outage. One on a host that was only
// Unknown does not: the outage's own reset makes hosts of other zones
// Unknown, and their next probe is no recovery.
func (t *Tracker) ObserveConnect(addr string, role Role) {
	s := t.snap.Load()
	if i, ok := s.index[addr]; !ok || (s.hosts[i].State == Healthy && s.hosts[i].Role == role) {
		return // nothing changes: a connect that recovers nothing leaves an outage as it is
	}
	t.update(addr, func(h *HostStatus, outage bool) bool {
		recovered := h.State > Unknown
		t.set(h, Healthy, role)
		return outage && !recovered
	})
}

// ObserveZone records the zone the server at addr advertised. An empty zone
// means nothing was advertised and changes nothing: the known zone,
// configured or advertised earlier, stays until a different one is
// advertised.
func (t *Tracker) ObserveZone(addr, zone string) {
	s := t.snap.Load()
	if i, ok := s.index[addr]; !ok || zone == "" || s.hosts[i].Zone == zone {
		return
	}
	t.update(addr, func(h *HostStatus, outage bool) bool {
		h.Zone = zone
		return outage
	})
}

// ObserveFailure records a failure on addr classified as c (see Classify).
// Transient makes the host TransientReject and Transport makes it
// TransportError; both keep its last known role. Topology means the server
// answered but refused the work for its role, which for this library is a
// write refused by a read-only server: the host is reachable (Healthy) and
// in the replica role. Report a role the server stated with ObserveConnect
// instead. Terminal and NotFailover are not about the host and change
// nothing.
//
// The first failure after a success starts a new outage. At that moment
// every Healthy host known to be in another zone than the client's is reset
// to Unknown, so that a walk tries local hosts again before settling on a
// remote one.
func (t *Tracker) ObserveFailure(addr string, c Class) {
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
		return
	}
	if s := t.snap.Load(); s.outage {
		if i, ok := s.index[addr]; !ok || (s.hosts[i].State == want && (role == RoleUnknown || s.hosts[i].Role == role)) {
			return
		}
	}
	t.update(addr, func(h *HostStatus, outage bool) bool {
		if role == RoleUnknown {
			role = h.Role
		}
		t.set(h, want, role)
		return true
	})
}

// update applies change to the host at addr in a new snapshot. change
// returns whether an outage is under way afterwards. A new outage resets the
// Healthy hosts of other zones.
func (t *Tracker) update(addr string, change func(h *HostStatus, outage bool) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.snap.Load()
	i, ok := s.index[addr]
	if !ok {
		return
	}
	hs := slices.Clone(s.hosts)
	outage := change(&hs[i], s.outage)
	if hs[i] == s.hosts[i] && outage == s.outage {
		return // a racing observer already recorded the same
	}
	if outage && !s.outage {
		for j := range hs {
			if j != i && hs[j].State == Healthy && t.tierOf(TargetAny, hs[j].Zone) == TierOther {
				t.set(&hs[j], Unknown, hs[j].Role)
			}
		}
	}
	t.publish(hs, outage)
}

// set moves h to state and role, stamping Since when either changes.
// Called with mu held, on a host slice not yet published.
func (t *Tracker) set(h *HostStatus, state State, role Role) {
	if h.State != state || h.Role != role {
		h.State, h.Role = state, role
		h.Since = t.now()
	}
}

// tierOf returns the tier, for target, of a host whose known zone is zone.
func (t *Tracker) tierOf(target Target, zone string) Tier { return ZoneTier(target, t.zone, zone) }

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

// publish ranks hs for every target, makes it the current snapshot and
// tells the waiters of the previous one. hs must not be modified
// afterwards. Called with mu held, or before t is shared.
func (t *Tracker) publish(hs []HostStatus, outage bool) {
	s := &Snapshot{hosts: hs, outage: outage, changed: make(chan struct{}), index: make(map[string]int, len(hs))}
	for i, h := range hs {
		s.index[h.Addr] = i
	}
	for target := range s.order {
		s.order[target], s.states[target] = t.rank(hs, Target(target))
	}
	if old := t.snap.Swap(s); old != nil {
		close(old.changed)
	}
}

// rank returns the host indexes of hs sorted by (ranking state, tier) for
// target, keeping the given order among equals, and each host's ranking
// state.
func (t *Tracker) rank(hs []HostStatus, target Target) (order []int, states []State) {
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
		keys[i] = int(states[i])*numTiers + int(t.tierOf(target, h.Zone))
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
// already computed. Host indexes are positions in this snapshot only: the
// next snapshot may hold other hosts, so keep addresses, not indexes,
// across snapshots.
type Snapshot struct {
	hosts   []HostStatus // in the order given to SetHosts
	index   map[string]int
	order   [numTargets][]int
	states  [numTargets][]State
	outage  bool          // a failure was seen and no host recovered since
	changed chan struct{} // closed when a newer snapshot is published
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

// Changed returns a channel that is closed once a newer snapshot has been
// published. A caller waiting for the hosts to change takes a snapshot,
// finds nothing usable in it, and waits on its Changed channel: no change
// can slip between the two.
func (s *Snapshot) Changed() <-chan struct{} { return s.changed }
