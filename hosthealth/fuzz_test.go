package hosthealth

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// model is a deliberately naive restatement of the tracker's rules over
// facts, used as the oracle for FuzzTracker. It shares no code with the
// tracker: targets, tiers and rankings are worked out from scratch.
type model struct {
	zone   string      // the client's
	config []HostSpec  // the list last given to SetHosts, duplicates and all
	hosts  []modelHost // the tracked hosts, first entry of each address
	outage bool
	now    int // clock reading, in steps
}

type modelHost struct {
	addr    string
	state   State
	role    Role // reported
	claimed Role
	zone    string
	since   int
}

func (m *model) find(addr string) *modelHost {
	for i := range m.hosts {
		if m.hosts[i].addr == addr {
			return &m.hosts[i]
		}
	}
	return nil
}

// set moves h to state and role, stamping since when either changes.
func (m *model) set(h *modelHost, state State, role Role) {
	if h.state != state || h.role != role {
		h.state, h.role, h.since = state, role, m.now
	}
}

func (m *model) setHosts(config []HostSpec) {
	m.config = slices.Clone(config)
	var next []modelHost
	for _, c := range config {
		dup := false
		for _, h := range next {
			dup = dup || h.addr == c.Addr
		}
		if dup {
			continue
		}
		h := modelHost{addr: c.Addr, state: Unknown, zone: c.Zone, since: m.now}
		if old := m.find(c.Addr); old != nil {
			h = *old
			if c.Zone != "" {
				h.zone = c.Zone
			}
		}
		h.claimed = c.Claimed
		next = append(next, h)
	}
	m.hosts = next
}

func (m *model) connect(addr string, r Role) {
	h := m.find(addr)
	if h == nil {
		return
	}
	if h.state == TransientReject || h.state == TransportError {
		m.outage = false // a host came back from a failure
	}
	m.set(h, Healthy, r)
}

func (m *model) fail(addr string, c Class) {
	h := m.find(addr)
	if h == nil {
		return
	}
	var state State
	role := h.role
	switch c {
	case Topology:
		state, role = Healthy, RoleReplica
	case Transient:
		state = TransientReject
	case Transport:
		state = TransportError
	default:
		return
	}
	if !m.outage {
		m.outage = true
		for j := range m.hosts {
			o := &m.hosts[j]
			remote := m.zone != "" && o.zone != "" && !strings.EqualFold(o.zone, m.zone)
			if o.addr != addr && o.state == Healthy && remote {
				m.set(o, Unknown, o.role)
			}
		}
	}
	m.set(h, state, role)
}

func (m *model) observeZone(addr, z string) {
	if h := m.find(addr); h != nil && z != "" {
		h.zone = z
	}
}

// stateFor is the state h ranks with for target before the prefer-standby
// demotion.
func (m *model) stateFor(h modelHost, target Target) State {
	role := h.role
	if role == RoleUnknown {
		role = h.claimed
	}
	var ok bool
	switch target {
	case TargetPrimary:
		ok = role == RolePrimary
	case TargetReplica:
		ok = role == RoleReplica
	default:
		ok = role != RoleUnknown
	}
	switch {
	case h.state == Healthy && !ok:
		return TopologyReject
	case h.state == Unknown && role != RoleUnknown && !ok:
		return TopologyReject
	}
	return h.state
}

// rankState is stateFor with prefer-standby's demotion of primaries.
func (m *model) rankState(h modelHost, target Target) State {
	if target == TargetPreferReplica {
		role := func(h modelHost) Role {
			if h.role != RoleUnknown {
				return h.role
			}
			return h.claimed
		}
		if role(h) == RolePrimary {
			for _, o := range m.hosts {
				if s := m.stateFor(o, target); role(o) == RoleReplica && (s == Healthy || s == Unknown) {
					return TopologyReject
				}
			}
		}
	}
	return m.stateFor(h, target)
}

func (m *model) tier(h modelHost, target Target) Tier {
	switch {
	case target == TargetPrimary || m.zone == "":
		return TierSame
	case h.zone == "":
		return TierUnknown
	case strings.EqualFold(h.zone, m.zone):
		return TierSame
	}
	return TierOther
}

// ranking sorts by selection: repeatedly take the first remaining host
// with the smallest (state, tier).
func (m *model) ranking(target Target) []int {
	less := func(a, b modelHost) bool {
		sa, sb := m.rankState(a, target), m.rankState(b, target)
		if sa != sb {
			return sa < sb
		}
		return m.tier(a, target) < m.tier(b, target)
	}
	taken := make([]bool, len(m.hosts))
	out := []int{}
	for range m.hosts {
		best := -1
		for i, h := range m.hosts {
			if taken[i] {
				continue
			}
			if best < 0 || less(h, m.hosts[best]) {
				best = i
			}
		}
		taken[best] = true
		out = append(out, best)
	}
	return out
}

// Limits that keep one input fast: SetHosts with duplicates is quadratic.
const maxFuzzConfig, maxFuzzOps = 16, 256

var (
	fuzzZones = []string{"", "eu-1a", "EU-1A", "eu-1b", "eu-1c"}
	// fuzzAddrs is the pool hosts are drawn from; observations may name an
	// address that is not tracked (never added, or removed).
	fuzzAddrs = []string{"h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8", "h9"}
)

// FuzzTracker feeds a tracker and the model the same operations and
// compares every host's facts, Since, the four rankings, the ranking
// states, the outage and whether a new snapshot was published.
//
// Input: byte 0 bit 0 sets the client's zone; byte 1 is the number of
// starting hosts (1 + b%8); then one byte per starting host (zone in the
// low nibble, claimed role in the high one). Then pairs (op, arg): op's
// high nibble picks connect, fail, zone, add, remove or reclaim and its
// low nibble the address (or the position, for remove and reclaim).
func FuzzTracker(f *testing.F) {
	f.Add([]byte{1, 3, 0x01, 0x13, 0x20, 0x00, 2, 0x11, 2, 0x22, 1, 0x12, 3, 0x03, 1})
	f.Add([]byte{1, 4, 0x01, 0x11, 0x23, 0x04, 0x00, 1, 0x01, 2, 0x12, 4, 0x31, 0x25, 0x02, 2, 0x23, 3, 0x10, 3})
	f.Add([]byte{0, 2, 0x00, 0x10, 0x00, 0, 0x11, 2, 0x12, 2, 0x40, 0, 0x11, 4, 0x01, 1})
	f.Add([]byte{1, 7, 1, 2, 3, 4, 0x11, 0x22, 0, 0x00, 2, 0x01, 2, 0x12, 3, 0x15, 4, 0x26, 3, 0x37, 0x14, 0x48, 0, 0x58, 0x21, 0x18, 2, 0x02, 1})
	f.Add([]byte{1, 2, 0x03, 0x23, 0x00, 2, 0x11, 1, 0x11, 1, 0x01, 2, 0x50, 0x13, 0x40, 0, 0x10, 3})
	f.Fuzz(fuzzTracker)
}

// fuzzTracker runs one FuzzTracker input.
func fuzzTracker(t *testing.T, data []byte) {
	if len(data) < 2 {
		return
	}
	clientZone := ""
	if data[0]%2 == 1 {
		clientZone = "eu-1a"
	}
	n := 1 + int(data[1])%8
	data = data[2:]
	if len(data) < n {
		return
	}
	hosts := make([]HostSpec, n)
	for i := range n {
		hosts[i] = HostSpec{
			Addr:    fuzzAddrs[i],
			Zone:    fuzzZones[int(data[i]&0x0f)%len(fuzzZones)],
			Claimed: Role(data[i] >> 4 % 3),
		}
	}
	data = data[n:]

	clk := newFakeClock()
	t0 := clk.Now()
	tr := newTracker(hosts, Options{Zone: clientZone, Clock: clk})
	m := &model{zone: clientZone}
	m.setHosts(hosts)
	check(t, "start", tr, m, t0)

	if len(data) > 2*maxFuzzOps {
		data = data[:2*maxFuzzOps]
	}
	for len(data) >= 2 {
		kind, k, arg := data[0]>>4, int(data[0]&0x0f), data[1]
		data = data[2:]
		m.now++
		clk.Advance(time.Second)
		addr := fuzzAddrs[k%len(fuzzAddrs)]
		before := tr.Snapshot()
		mBefore := m.fingerprint()
		var desc string
		observation := true
		switch kind % 6 {
		case 0:
			r := Role(arg % 3)
			desc = fmt.Sprintf("connect(%s, %v)", addr, r)
			tr.ObserveConnect(addr, r)
			m.connect(addr, r)
		case 1:
			c := Class(arg % 5)
			desc = fmt.Sprintf("fail(%s, %v)", addr, c)
			tr.ObserveFailure(addr, c)
			m.fail(addr, c)
		case 2:
			z := fuzzZones[int(arg)%len(fuzzZones)]
			desc = fmt.Sprintf("zone(%s, %q)", addr, z)
			tr.ObserveZone(addr, z)
			m.observeZone(addr, z)
		case 3: // add a host (an address already there is a duplicate)
			if len(m.config) >= maxFuzzConfig {
				continue
			}
			h := HostSpec{Addr: addr, Zone: fuzzZones[int(arg&0x0f)%len(fuzzZones)], Claimed: Role(arg >> 4 % 3)}
			config := append(slices.Clone(m.config), h)
			desc = fmt.Sprintf("add(%+v)", h)
			tr.SetHosts(config)
			m.setHosts(config)
			observation = false
		case 4: // remove the host at position k
			if len(m.config) == 0 {
				continue
			}
			config := slices.Delete(slices.Clone(m.config), k%len(m.config), k%len(m.config)+1)
			desc = fmt.Sprintf("remove(%s)", m.config[k%len(m.config)].Addr)
			tr.SetHosts(config)
			m.setHosts(config)
			observation = false
		case 5: // the source reconfigures the host at position k
			if len(m.config) == 0 {
				continue
			}
			config := slices.Clone(m.config)
			c := &config[k%len(config)]
			c.Zone, c.Claimed = fuzzZones[int(arg&0x0f)%len(fuzzZones)], Role(arg>>4%3)
			desc = fmt.Sprintf("reconfigure(%+v)", *c)
			tr.SetHosts(config)
			m.setHosts(config)
			observation = false
		}

		check(t, desc, tr, m, t0)
		if e := checkSnapshot(tr, tr.Snapshot()); e != "" {
			t.Fatalf("after %s: %s", desc, e)
		}

		// A new state comes back exactly when an observation changed
		// something; a SetHosts that changes something makes one too.
		published := tr.Snapshot() != before
		changed := m.fingerprint() != mBefore
		if (observation && published != changed) || (!observation && changed && !published) {
			t.Fatalf("after %s: published %v, model changed %v", desc, published, changed)
		}
	}
}

// fingerprint describes everything the model knows.
func (m *model) fingerprint() string {
	return fmt.Sprintf("%v %+v", m.outage, m.hosts)
}

// check compares tr's current snapshot with m.
func check(t *testing.T, desc string, tr *tracker, m *model, t0 time.Time) {
	t.Helper()
	s := tr.Snapshot()
	if s.Len() != len(m.hosts) {
		t.Fatalf("after %s: %d hosts, want %d", desc, s.Len(), len(m.hosts))
	}
	for j, want := range m.hosts {
		h := s.Host(j)
		if h.Addr != want.addr || h.State != want.state || h.Role != want.role || h.Claimed != want.claimed || h.Zone != want.zone {
			t.Fatalf("after %s: host %d is %s %v/%v claimed %v zone %q, want %s %v/%v claimed %v zone %q",
				desc, j, h.Addr, h.State, h.Role, h.Claimed, h.Zone, want.addr, want.state, want.role, want.claimed, want.zone)
		}
		if wantSince := t0.Add(time.Duration(want.since) * time.Second); !h.Since.Equal(wantSince) {
			t.Fatalf("after %s: host %s Since %v, want %v", desc, h.Addr, h.Since, wantSince)
		}
		if i, ok := s.Lookup(h.Addr); !ok || i != j {
			t.Fatalf("after %s: Lookup(%s) = %d, %v, want %d", desc, h.Addr, i, ok, j)
		}
		for _, target := range allTargets {
			if got, want := h.StateFor(target), m.stateFor(want, target); got != want {
				t.Fatalf("after %s: host %s StateFor(%v) %v, want %v", desc, h.Addr, target, got, want)
			}
			if got, want := s.State(j, target), m.rankState(want, target); got != want {
				t.Fatalf("after %s: host %s State(%v) %v, want %v", desc, h.Addr, target, got, want)
			}
			if got, want := s.Usable(j, target), m.rankState(want, target) <= Unknown; got != want {
				t.Fatalf("after %s: host %s Usable(%v) %v, want %v", desc, h.Addr, target, got, want)
			}
		}
	}
	for _, addr := range fuzzAddrs {
		if _, ok := s.Lookup(addr); ok != (m.find(addr) != nil) {
			t.Fatalf("after %s: Lookup(%s) found %v", desc, addr, ok)
		}
	}
	for _, target := range allTargets {
		r, want := s.Ranking(target), m.ranking(target)
		if !slices.Equal(r, want) {
			t.Fatalf("after %s: %v ranking %v, want %v", desc, target, r, want)
		}
		wantPick := -1
		if len(want) > 0 {
			wantPick = want[0]
		}
		if p := s.Pick(target); p != wantPick {
			t.Fatalf("after %s: %v Pick %d, want %d", desc, target, p, wantPick)
		}
	}
	if s.outage != m.outage {
		t.Fatalf("after %s: outage %v, want %v", desc, s.outage, m.outage)
	}
}
