package hosthealth

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Host is one server as configured.
type Host struct {
	Addr string // host:port
	Zone string // zone configured for the host (zones= in the DSN); "" if none
}

// HostStatus is what the tracker knows about one host at a moment.
type HostStatus struct {
	Addr  string
	State State     // the real state; see Tracker.Ranking for how a target can rank it lower
	Tier  Tier      // zone tier relative to the client
	Role  Role      // last role the server reported; kept across failures
	Zone  string    // last known zone: configured, or later advertised; "" if none
	Since time.Time // when State last changed
}

// Options configure a Tracker.
type Options struct {
	Target Target           // which role a usable host must have
	Zone   string           // the client's zone; "" means unset
	Now    func() time.Time // clock for HostStatus.Since; nil means time.Now
}

// Tracker folds observations about a fixed list of hosts into a ranking.
//
// Readers (Pick, Ranking, Status, Statuses, Role, Len) never block: they
// read an immutable snapshot through an atomic pointer. Writers (the
// Observe methods) take a mutex, build a new snapshot with the ranking
// precomputed, and publish it. Observations that change nothing return
// without locking or allocating, so reporting every successful query is
// cheap.
//
// Host indexes are positions in the slice given to NewTracker (DSN order).
// An index out of range panics, like a slice index.
//
// All methods are safe for concurrent use.
type Tracker struct {
	target Target
	zone   string
	now    func() time.Time

	// mu serializes writers: it guards the load-modify-publish of snap so
	// that two observations never build on the same old snapshot and lose
	// one another. Readers do not take it. No I/O while held.
	mu sync.Mutex
	// snap is the current view. A published snapshot is never modified.
	snap atomic.Pointer[snapshot]
}

// snapshot is an immutable view of every host, with the ranking already
// computed.
type snapshot struct {
	hosts  []HostStatus // DSN order
	order  []int        // indexes into hosts, best first
	outage bool         // a failure was seen and no connect has succeeded since
}

// NewTracker returns a Tracker for hosts, every one Unknown with an unknown
// role. The slice is copied.
func NewTracker(hosts []Host, opts Options) *Tracker {
	t := &Tracker{target: opts.Target, zone: opts.Zone, now: opts.Now}
	if t.now == nil {
		t.now = time.Now
	}
	now := t.now()
	hs := make([]HostStatus, len(hosts))
	for i, h := range hosts {
		hs[i] = HostStatus{
			Addr:  h.Addr,
			State: Unknown,
			Tier:  t.tierOf(h.Zone),
			Role:  RoleUnknown,
			Zone:  h.Zone,
			Since: now,
		}
	}
	t.publish(hs, false)
	return t
}

// Len returns the number of hosts.
func (t *Tracker) Len() int { return len(t.snap.Load().hosts) }

// Pick returns the index of the best host, or -1 when there are no hosts.
// The best host may still be unusable (every host can be rejected); check
// its Status when that matters.
func (t *Tracker) Pick() int {
	s := t.snap.Load()
	if len(s.order) == 0 {
		return -1
	}
	return s.order[0]
}

// Ranking returns every host index, best first. Ranking is by
// (state, tier) with ties in DSN order. Under TargetPreferReplica a primary
// ranks as if TopologyReject while any replica is usable (its state is
// better than TransportError).
//
// The slice is shared with other callers and must not be modified. It stays
// valid, unchanged, after later observations.
func (t *Tracker) Ranking() []int { return t.snap.Load().order }

// Status returns what is known about host i.
func (t *Tracker) Status(i int) HostStatus { return t.snap.Load().hosts[i] }

// Statuses returns a copy of every host's status in DSN order.
func (t *Tracker) Statuses() []HostStatus { return slices.Clone(t.snap.Load().hosts) }

// Role returns the last role observed on host i.
func (t *Tracker) Role(i int) Role { return t.snap.Load().hosts[i].Role }

// ObserveConnect records that a connect, probe or query on host i
// succeeded and that the server is in role. The host becomes Healthy when
// the target accepts role, otherwise TopologyReject.
//
// A connect that makes the host Healthy ends the current outage. One that
// finds the wrong role does not: a background probe of a standby under a
// primary target is not a sign of recovery.
func (t *Tracker) ObserveConnect(i int, role Role) {
	want := TopologyReject
	if t.target.Accepts(role) {
		want = Healthy
	}
	if s := t.snap.Load(); !s.outage || want != Healthy {
		if h := s.hosts[i]; h.State == want && h.Role == role {
			return
		}
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.snap.Load()
	hs := slices.Clone(s.hosts)
	hs[i].Role = role
	t.setState(&hs[i], want)
	t.publish(hs, s.outage && want != Healthy)
}

// ObserveZone records the zone server i advertised. An empty zone means
// nothing was advertised and changes nothing: the known zone, configured or
// advertised earlier, stays until a different one is advertised.
func (t *Tracker) ObserveZone(i int, zone string) {
	s := t.snap.Load()
	if zone == "" || s.hosts[i].Zone == zone {
		return
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	s = t.snap.Load()
	hs := slices.Clone(s.hosts)
	hs[i].Zone = zone
	hs[i].Tier = t.tierOf(zone)
	t.publish(hs, s.outage)
}

// ObserveFailure records a failure on host i classified as c (see
// Classify). Topology makes the host TopologyReject, Transient makes it
// TransientReject, and Transport makes it TransportError. Terminal and
// NotFailover are not about the host and change nothing. The host's last
// known role is kept.
//
// The first failure after a success starts a new outage. At that moment
// every Healthy host in TierOther is reset to Unknown, so that a walk tries
// local hosts again before settling on a remote one. A Healthy host in
// TierSame (or TierUnknown) stays Healthy, and so stays ahead of the rest.
func (t *Tracker) ObserveFailure(i int, c Class) {
	var want State
	switch c {
	case Topology:
		want = TopologyReject
	case Transient:
		want = TransientReject
	case Transport:
		want = TransportError
	default:
		_ = t.snap.Load().hosts[i] // same panic for a bad index as the other classes
		return
	}
	if s := t.snap.Load(); s.outage && s.hosts[i].State == want {
		return
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.snap.Load()
	hs := slices.Clone(s.hosts)
	if !s.outage {
		for j := range hs {
			if hs[j].State == Healthy && hs[j].Tier == TierOther {
				t.setState(&hs[j], Unknown)
			}
		}
	}
	t.setState(&hs[i], want)
	t.publish(hs, true)
}

// setState moves h to state, stamping Since when the state changes. Called
// with mu held, on a host slice not yet published.
func (t *Tracker) setState(h *HostStatus, state State) {
	if h.State != state {
		h.State = state
		h.Since = t.now()
	}
}

// tierOf returns the tier of a host whose known zone is zone.
func (t *Tracker) tierOf(zone string) Tier {
	switch {
	case t.target == TargetPrimary || t.zone == "":
		// Writes follow the primary wherever it is, and a client with no
		// zone has no preference.
		return TierSame
	case zone == "":
		return TierUnknown
	case strings.EqualFold(zone, t.zone):
		return TierSame
	default:
		return TierOther
	}
}

// publish ranks hs and makes it the current snapshot. hs must not be
// modified afterwards. Called with mu held, or before t is shared.
func (t *Tracker) publish(hs []HostStatus, outage bool) {
	t.snap.Store(&snapshot{hosts: hs, order: rank(hs, t.target), outage: outage})
}

// rank returns the host indexes of hs sorted by (ranking state, tier),
// keeping DSN order among equals.
func rank(hs []HostStatus, target Target) []int {
	demotePrimaries := false
	if target == TargetPreferReplica {
		for _, h := range hs {
			if h.Role == RoleReplica && h.State < TransportError {
				demotePrimaries = true
				break
			}
		}
	}
	// There are only numStates*numTiers distinct keys, so a counting sort
	// does it in linear time, and it is stable by construction.
	key := func(h HostStatus) int {
		st := h.State
		if demotePrimaries && h.Role == RolePrimary {
			st = TopologyReject
		}
		return int(st)*numTiers + int(h.Tier)
	}
	var start [numStates*numTiers + 1]int
	for _, h := range hs {
		start[key(h)+1]++
	}
	for k := 1; k < len(start); k++ {
		start[k] += start[k-1]
	}
	order := make([]int, len(hs))
	for i, h := range hs {
		k := key(h)
		order[start[k]] = i
		start[k]++
	}
	return order
}
