package hosthealth

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a manual clock for HostStatus.Since.
type fakeClock struct {
	mu  sync.Mutex // guards now; no I/O while held
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// tracker keeps the current state and folds each observation into it, as
// the owner of the Pool's host state does, so that the tests below read as
// a sequence of observations.
type tracker struct{ s *Snapshot }

func newTracker(hosts []HostSpec, opts Options) *tracker { return &tracker{s: New(hosts, opts)} }

func (t *tracker) Snapshot() *Snapshot                { return t.s }
func (t *tracker) SetHosts(hosts []HostSpec)          { t.s = t.s.SetHosts(hosts) }
func (t *tracker) ObserveConnect(addr string, r Role) { t.s = t.s.ObserveConnect(addr, r) }
func (t *tracker) ObserveZone(addr, zone string)      { t.s = t.s.ObserveZone(addr, zone) }
func (t *tracker) ObserveFailure(addr string, c Class) {
	t.s = t.s.ObserveFailure(addr, c)
}
func (t *tracker) tierOf(target Target, zone string) Tier { return t.s.tierOf(target, zone) }

// allTargets lists every target, in the order of the [numTargets]string
// wants in the tables below: read-write, any, read-only, prefer-standby.
var allTargets = [numTargets]Target{TargetPrimary, TargetAny, TargetReplica, TargetPreferReplica}

// op is one observation (or host set change) fed to a tracker.
type op func(*tracker)

func conn(addr string, r Role) op   { return func(t *tracker) { t.ObserveConnect(addr, r) } }
func fail(addr string, c Class) op  { return func(t *tracker) { t.ObserveFailure(addr, c) } }
func zone(addr string, z string) op { return func(t *tracker) { t.ObserveZone(addr, z) } }
func set(specs ...string) op        { return func(t *tracker) { t.SetHosts(hostsOf(specs...)) } }
func apply(t *tracker, ops []op) {
	for _, o := range ops {
		o(t)
	}
}

// hostsOf builds hosts from specs of the form addr[=zone][/p|/r]:
// hostsOf("a", "b=eu-1b", "c/r") gives a with no zone, b in eu-1b, and c
// claimed to be a replica.
func hostsOf(specs ...string) []HostSpec {
	hs := make([]HostSpec, len(specs))
	for i, s := range specs {
		s, claim, _ := strings.Cut(s, "/")
		addr, z, _ := strings.Cut(s, "=")
		hs[i] = HostSpec{Addr: addr, Zone: z, Claimed: map[string]Role{"": RoleUnknown, "p": RolePrimary, "r": RoleReplica}[claim]}
	}
	return hs
}

// ranking returns the addresses of s's hosts best first for target,
// space-separated.
func ranking(s *Snapshot, target Target) string {
	var b strings.Builder
	for n, i := range s.Ranking(target) {
		if n > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s.Host(i).Addr)
	}
	return b.String()
}

// rankings returns ranking(s, target) for every target.
func rankings(s *Snapshot) [numTargets]string {
	var r [numTargets]string
	for _, target := range allTargets {
		r[target] = ranking(s, target)
	}
	return r
}

// states returns every host's reachability State in the given order,
// space-separated.
func states(s *Snapshot) string {
	var b strings.Builder
	for n, h := range s.Hosts() {
		if n > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(h.State.String())
	}
	return b.String()
}

// rankStates returns the state every host ranks with for target, in the
// given order, space-separated.
func rankStates(s *Snapshot, target Target) string {
	var b strings.Builder
	for i := range s.Len() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s.State(i, target).String())
	}
	return b.String()
}

var (
	stateAbbr = map[State]string{Healthy: "H", Unknown: "U", TransientReject: "TR", TransportError: "TE", TopologyReject: "TOP"}
	roleAbbr  = map[Role]string{RoleUnknown: "-", RolePrimary: "p", RoleReplica: "r"}
)

// cell describes host i of s as "State/role, then the state it ranks with
// for each target": "H/p H H TOP H" is a Healthy host whose server said it
// is a primary, usable for every target but read-only.
func cell(s *Snapshot, i int) string {
	h := s.Host(i)
	parts := []string{stateAbbr[h.State] + "/" + roleAbbr[h.Role]}
	for _, target := range allTargets {
		parts = append(parts, stateAbbr[s.State(i, target)])
	}
	return strings.Join(parts, " ")
}

// facts describes every host of s as "addr State/role/claimed zone",
// comma-separated; "-" stands for an unknown role or an empty zone.
func facts(s *Snapshot) string {
	var parts []string
	for _, h := range s.Hosts() {
		z := h.Zone
		if z == "" {
			z = "-"
		}
		parts = append(parts, fmt.Sprintf("%s %s/%s/%s %s", h.Addr, stateAbbr[h.State], roleAbbr[h.Role], roleAbbr[h.Claimed], z))
	}
	return strings.Join(parts, ", ")
}

func TestStateFor(t *testing.T) {
	const (
		H   = Healthy
		U   = Unknown
		TR  = TransientReject
		TE  = TransportError
		TOP = TopologyReject
		p   = RolePrimary
		r   = RoleReplica
		x   = RoleUnknown
	)
	tests := []struct {
		state         State
		role, claimed Role
		want          [numTargets]State // read-write, any, read-only, prefer-standby
	}{
		{H, p, x, [4]State{H, H, TOP, H}},
		{H, r, x, [4]State{TOP, H, H, H}},
		{H, x, x, [4]State{TOP, TOP, TOP, TOP}}, // answered without a role: no target takes it
		{H, x, p, [4]State{H, H, TOP, H}},       // the claim stands in for the role
		{H, x, r, [4]State{TOP, H, H, H}},
		{H, r, p, [4]State{TOP, H, H, H}}, // the server's report beats the claim
		{H, p, r, [4]State{H, H, TOP, H}},
		{U, x, x, [4]State{U, U, U, U}},
		{U, p, x, [4]State{U, U, TOP, U}},
		{U, r, x, [4]State{TOP, U, U, U}},
		{U, x, p, [4]State{U, U, TOP, U}},
		{U, x, r, [4]State{TOP, U, U, U}},
		{U, p, r, [4]State{U, U, TOP, U}},
		{U, r, p, [4]State{TOP, U, U, U}},
		{TR, p, x, [4]State{TR, TR, TR, TR}}, // failures rank as failures whatever the role
		{TR, r, p, [4]State{TR, TR, TR, TR}},
		{TR, x, x, [4]State{TR, TR, TR, TR}},
		{TE, p, x, [4]State{TE, TE, TE, TE}},
		{TE, x, r, [4]State{TE, TE, TE, TE}},
	}
	for _, tt := range tests {
		h := HostStatus{Addr: "a", State: tt.state, Role: tt.role, Claimed: tt.claimed}
		for _, target := range allTargets {
			if got := h.StateFor(target); got != tt.want[target] {
				t.Errorf("%v role %v claimed %v, %v: StateFor %v, want %v", tt.state, tt.role, tt.claimed, target, got, tt.want[target])
			}
		}
	}
}

func TestTransitions(t *testing.T) {
	// Ways to bring a single host "a" into each starting state. Each want
	// below is a cell: the facts, then the state for read-write, any,
	// read-only and prefer-standby.
	from := []struct {
		name  string
		host  string
		setup []op
		cell  string
	}{
		{"unknown", "a", nil, "U/- U U U U"},
		{"unknown, claimed replica", "a/r", nil, "U/- TOP U U U"},
		{"healthy primary", "a", []op{conn("a", RolePrimary)}, "H/p H H TOP H"},
		{"healthy replica", "a", []op{conn("a", RoleReplica)}, "H/r TOP H H H"},
		{"healthy, no role", "a", []op{conn("a", RoleUnknown)}, "H/- TOP TOP TOP TOP"},
		{"transient-reject primary", "a", []op{conn("a", RolePrimary), fail("a", Transient)}, "TR/p TR TR TR TR"},
		{"transport-error replica", "a", []op{conn("a", RoleReplica), fail("a", Transport)}, "TE/r TE TE TE TE"},
		{"transport-error, claimed primary", "a/p", []op{fail("a", Transport)}, "TE/- TE TE TE TE"},
	}
	const same = "" // the event changes nothing
	all := func(c string) []string { return slices.Repeat([]string{c}, len(from)) }
	tests := []struct {
		event string
		do    op
		want  []string // indexed like from
	}{
		{"connect primary", conn("a", RolePrimary), all("H/p H H TOP H")},
		{"connect replica", conn("a", RoleReplica), all("H/r TOP H H H")},
		{"connect, no role", conn("a", RoleUnknown), []string{
			"H/- TOP TOP TOP TOP",
			"H/- TOP H H H", // the claim still counts
			"H/- TOP TOP TOP TOP",
			"H/- TOP TOP TOP TOP",
			"H/- TOP TOP TOP TOP",
			"H/- TOP TOP TOP TOP",
			"H/- TOP TOP TOP TOP",
			"H/- H H TOP H",
		}},
		{"fail not-failover", fail("a", NotFailover), all(same)},
		{"fail terminal", fail("a", Terminal), all(same)},
		// A write refused by a read-only server: reachable, and a replica.
		{"fail topology", fail("a", Topology), all("H/r TOP H H H")},
		{"fail transient", fail("a", Transient), []string{
			"TR/- TR TR TR TR",
			"TR/- TR TR TR TR",
			"TR/p TR TR TR TR",
			"TR/r TR TR TR TR",
			"TR/- TR TR TR TR",
			"TR/p TR TR TR TR",
			"TR/r TR TR TR TR",
			"TR/- TR TR TR TR",
		}},
		{"fail transport", fail("a", Transport), []string{
			"TE/- TE TE TE TE",
			"TE/- TE TE TE TE",
			"TE/p TE TE TE TE",
			"TE/r TE TE TE TE",
			"TE/- TE TE TE TE",
			"TE/p TE TE TE TE",
			"TE/r TE TE TE TE",
			"TE/- TE TE TE TE",
		}},
		{"zone", zone("a", "eu-1b"), all(same)},
	}
	for _, tt := range tests {
		for k, f := range from {
			name := fmt.Sprintf("%s/%s", f.name, tt.event)
			tr := newTracker(hostsOf(f.host), Options{Zone: "eu-1a"})
			apply(tr, f.setup)
			if got := cell(tr.Snapshot(), 0); got != f.cell {
				t.Fatalf("%s: setup gave %q, want %q", name, got, f.cell)
			}
			tt.do(tr)
			s := tr.Snapshot()
			want := tt.want[k]
			if want == same {
				want = f.cell
			}
			if got := cell(s, 0); got != want {
				t.Errorf("%s: got %q, want %q", name, got, want)
			}
			// With a single host, the ranking state is the host's own.
			for _, target := range allTargets {
				if got, want := s.State(0, target), s.Host(0).StateFor(target); got != want {
					t.Errorf("%s: %v: State %v, StateFor %v", name, target, got, want)
				}
				if got, want := s.Usable(0, target), s.State(0, target) <= Unknown; got != want {
					t.Errorf("%s: %v: Usable %v, want %v", name, target, got, want)
				}
			}
		}
	}
}

func TestRoleTracking(t *testing.T) {
	tr := newTracker(hostsOf("a", "b"), Options{})
	if got := tr.Snapshot().Host(0).Role; got != RoleUnknown {
		t.Fatalf("initial role %v, want unknown", got)
	}
	tr.ObserveConnect("a", RolePrimary)
	for _, c := range []Class{Transport, Transient, Terminal, NotFailover} {
		tr.ObserveFailure("a", c)
		if got := tr.Snapshot().Host(0).Role; got != RolePrimary {
			t.Errorf("after %v failure: role %v, want primary (kept)", c, got)
		}
	}
	steps := []struct {
		name string
		do   op
		want string // facts
	}{
		{"a write refused: a is a replica now", fail("a", Topology), "a H/r/- -, b U/-/- -"},
		{"b is promoted", conn("b", RolePrimary), "a H/r/- -, b H/p/- -"},
		{"the source claims the old roles", set("a/p", "b/r"), "a H/r/p -, b H/p/r -"},
		{"a is promoted back", conn("a", RolePrimary), "a H/p/p -, b H/p/r -"},
		{"b reports no role", conn("b", RoleUnknown), "a H/p/p -, b H/-/r -"},
	}
	for _, st := range steps {
		st.do(tr)
		if got := facts(tr.Snapshot()); got != st.want {
			t.Errorf("%s: facts %q, want %q", st.name, got, st.want)
		}
	}
	// The claim only counts while the server has not said otherwise.
	s := tr.Snapshot()
	if got := ranking(s, TargetPrimary); got != "a b" {
		t.Errorf("read-write ranking %q, want %q", got, "a b")
	}
	if got := rankStates(s, TargetReplica); got != "topology-reject healthy" {
		t.Errorf("read-only states %q, want b healthy by its claim", got)
	}
}

func TestSince(t *testing.T) {
	clk := newFakeClock()
	t0 := clk.Now()
	tr := newTracker(hostsOf("a", "b"), Options{Clock: clk})
	for i := range 2 {
		if got := tr.Snapshot().Host(i).Since; !got.Equal(t0) {
			t.Fatalf("host %d: initial Since %v, want %v", i, got, t0)
		}
	}
	steps := []struct {
		do    op
		state State
		since int // which clock reading Since must equal: index into the readings so far
	}{
		{conn("a", RolePrimary), Healthy, 1},
		{conn("a", RolePrimary), Healthy, 1},      // no change, Since stays
		{conn("a", RoleReplica), Healthy, 3},      // the role changed
		{fail("a", NotFailover), Healthy, 3},      // ignored
		{fail("a", Terminal), Healthy, 3},         // ignored
		{fail("a", Transport), TransportError, 6}, // changed
		{fail("a", Transport), TransportError, 6}, // same state again
		{zone("a", "eu-1a"), TransportError, 6},   // zone is not state
		{fail("a", Transient), TransientReject, 9},
		{fail("a", Topology), Healthy, 10}, // reachable replica
		{fail("a", Topology), Healthy, 10},
		{conn("a", RolePrimary), Healthy, 12},
		{set("a/r", "b"), Healthy, 12}, // a claim is not a role
	}
	readings := []time.Time{t0}
	for n, st := range steps {
		readings = append(readings, clk.Advance(time.Second))
		st.do(tr)
		got := tr.Snapshot().Host(0)
		if got.State != st.state || !got.Since.Equal(readings[st.since]) {
			t.Errorf("step %d: %v since %v, want %v since %v", n, got.State, got.Since, st.state, readings[st.since])
		}
	}
	if got := tr.Snapshot().Host(1).Since; !got.Equal(t0) {
		t.Errorf("untouched host: Since %v, want %v", got, t0)
	}

	// A new host is stamped when it is added; an outage reset stamps the
	// host it resets.
	t1 := clk.Advance(time.Second)
	tr = newTracker(hostsOf("a=eu-1a", "b=eu-1b"), Options{Zone: "eu-1a", Clock: clk})
	t2 := clk.Advance(time.Second)
	tr.ObserveConnect("b", RoleReplica)
	t3 := clk.Advance(time.Second)
	tr.SetHosts(hostsOf("a=eu-1a", "b=eu-1b", "c"))
	t4 := clk.Advance(time.Second)
	tr.ObserveFailure("a", Transport) // outage: b is reset
	s := tr.Snapshot()
	for i, want := range []time.Time{t4, t4, t3} {
		if got := s.Host(i).Since; !got.Equal(want) {
			t.Errorf("host %s: Since %v, want %v (t1 %v, t2 %v)", s.Host(i).Addr, got, want, t1, t2)
		}
	}
	if got := states(s); got != "transport-error unknown unknown" {
		t.Errorf("states %q", got)
	}
}

func TestNilClockUsesTimeNow(t *testing.T) {
	before := time.Now()
	tr := newTracker(hostsOf("a"), Options{})
	if s := tr.Snapshot().Host(0).Since; s.Before(before) || s.After(time.Now()) {
		t.Errorf("Since %v not between %v and now", s, before)
	}
}

func TestTier(t *testing.T) {
	tests := []struct {
		target     Target
		clientZone string
		hostZone   string
		want       Tier
	}{
		{TargetPrimary, "eu-1a", "eu-1b", TierSame},
		{TargetPrimary, "eu-1a", "", TierSame},
		{TargetReplica, "", "eu-1b", TierSame},
		{TargetReplica, "", "", TierSame},
		{TargetReplica, "eu-1a", "eu-1a", TierSame},
		{TargetReplica, "eu-1a", "EU-1A", TierSame},
		{TargetReplica, "eu-1a", "", TierUnknown},
		{TargetReplica, "eu-1a", "eu-1b", TierOther},
		{TargetAny, "eu-1a", "eu-1b", TierOther},
		{TargetAny, "eu-1a", "", TierUnknown},
		{TargetAny, "Eu-1A", "eu-1a", TierSame},
		{TargetPreferReplica, "eu-1a", "eu-1b", TierOther},
		{TargetPreferReplica, "eu-1a", "", TierUnknown},
		{TargetPreferReplica, "eu-1a", "eu-1a", TierSame},
	}
	for _, tt := range tests {
		tr := newTracker(nil, Options{Zone: tt.clientZone})
		if got := tr.tierOf(tt.target, tt.hostZone); got != tt.want {
			t.Errorf("%v client %q, host %q: tier %v, want %v", tt.target, tt.clientZone, tt.hostZone, got, tt.want)
		}
		if got := ZoneTier(tt.target, tt.clientZone, tt.hostZone); got != tt.want {
			t.Errorf("ZoneTier(%v, %q, %q) = %v, want %v", tt.target, tt.clientZone, tt.hostZone, got, tt.want)
		}
	}
}

func TestZoneRanking(t *testing.T) {
	// Two Unknown hosts, b given first: a ranks ahead exactly when its
	// tier, from a configured or an advertised zone, is better.
	tests := []struct {
		clientZone, hostZone string
		want                 [numTargets]string
	}{
		{"eu-1a", "eu-1a", [4]string{"b a", "a b", "a b", "a b"}},
		{"eu-1a", "EU-1A", [4]string{"b a", "a b", "a b", "a b"}},
		{"eu-1a", "eu-1b", [4]string{"b a", "b a", "b a", "b a"}},
		{"", "eu-1a", [4]string{"b a", "b a", "b a", "b a"}},
	}
	for _, tt := range tests {
		configured := newTracker([]HostSpec{{Addr: "b", Zone: "eu-1c"}, {Addr: "a", Zone: tt.hostZone}}, Options{Zone: tt.clientZone})
		advertised := newTracker([]HostSpec{{Addr: "b", Zone: "eu-1c"}, {Addr: "a"}}, Options{Zone: tt.clientZone})
		advertised.ObserveZone("a", tt.hostZone)
		for name, tr := range map[string]*tracker{"configured": configured, "advertised": advertised} {
			if got := rankings(tr.Snapshot()); got != tt.want {
				t.Errorf("client %q, %s %q: rankings %q, want %q", tt.clientZone, name, tt.hostZone, got, tt.want)
			}
		}
	}
}

func TestObserveZone(t *testing.T) {
	tr := newTracker(hostsOf("a", "b=eu-1a"), Options{Zone: "eu-1a"})
	steps := []struct {
		do   op
		host int
		zone string
		tier Tier // for TargetReplica
	}{
		{nil, 0, "", TierUnknown},
		{nil, 1, "eu-1a", TierSame},
		{zone("a", "eu-1b"), 0, "eu-1b", TierOther},
		{zone("a", ""), 0, "eu-1b", TierOther}, // nothing advertised: keep
		{zone("a", "EU-1A"), 0, "EU-1A", TierSame},
		{zone("b", "eu-1c"), 1, "eu-1c", TierOther}, // advertised beats configured
		{zone("b", ""), 1, "eu-1c", TierOther},
		{zone("x", "eu-1a"), 1, "eu-1c", TierOther}, // unknown address: ignored
	}
	for n, st := range steps {
		if st.do != nil {
			st.do(tr)
		}
		h := tr.Snapshot().Host(st.host)
		if tier := tr.tierOf(TargetReplica, h.Zone); h.Zone != st.zone || tier != st.tier {
			t.Errorf("step %d: host %d zone %q tier %v, want %q %v", n, st.host, h.Zone, tier, st.zone, st.tier)
		}
	}
}

func TestRanking(t *testing.T) {
	tests := []struct {
		name  string
		hosts []HostSpec
		zone  string // the client's
		ops   []op
		want  [numTargets]string // read-write, any, read-only, prefer-standby
	}{
		{
			name:  "fresh tracker keeps the given order",
			hosts: hostsOf("a", "b", "c"),
			want:  [4]string{"a b c", "a b c", "a b c", "a b c"},
		},
		{
			// One set of facts, four rankings: a primary first for writes,
			// replicas first for reads.
			name:  "lattice order",
			hosts: hostsOf("a", "b", "c", "d", "e"),
			ops: []op{
				conn("a", RoleReplica), conn("e", RolePrimary), fail("c", Transient), fail("b", Transport),
			},
			want: [4]string{"e d c b a", "a e d c b", "a d c b e", "a d c b e"},
		},
		{
			name:  "ties keep the given order",
			hosts: hostsOf("a", "b", "c", "d", "e"),
			ops: []op{
				fail("a", Transport), fail("c", Transport), conn("d", RoleReplica), conn("b", RolePrimary),
			},
			want: [4]string{"b e a c d", "b d e a c", "d e a c b", "d e a c b"},
		},
		{
			name:  "zone tier orders equal states",
			hosts: hostsOf("a=eu-1b", "b", "c=eu-1a"),
			zone:  "eu-1a",
			want:  [4]string{"a b c", "c b a", "c b a", "c b a"},
		},
		{
			name:  "zone tier orders healthy hosts",
			hosts: hostsOf("a=eu-1b", "b", "c=eu-1a", "d=EU-1A"),
			zone:  "eu-1a",
			ops:   []op{conn("a", RoleReplica), conn("b", RoleReplica), conn("c", RoleReplica), conn("d", RoleReplica)},
			want:  [4]string{"a b c d", "c d b a", "c d b a", "c d b a"},
		},
		{
			name:  "state beats tier",
			hosts: hostsOf("a=eu-1a", "b=eu-1b"),
			zone:  "eu-1a",
			ops:   []op{fail("a", Transient), conn("b", RoleReplica)},
			want:  [4]string{"a b", "b a", "b a", "b a"},
		},
		{
			name:  "client without zone ignores zones",
			hosts: hostsOf("a=eu-1b", "b=eu-1a", "c"),
			want:  [4]string{"a b c", "a b c", "a b c", "a b c"},
		},
		{
			name:  "failover: the promoted replica is first for writes",
			hosts: hostsOf("a", "b", "c"),
			ops: []op{
				conn("a", RolePrimary), conn("b", RoleReplica), conn("c", RoleReplica),
				fail("a", Transport), conn("b", RolePrimary),
			},
			want: [4]string{"b a c", "b c a", "c a b", "c a b"},
		},
		{
			name:  "claimed roles rank before any connect",
			hosts: hostsOf("a/r", "b/p", "c"),
			want:  [4]string{"b c a", "a b c", "a c b", "a c b"},
		},
		{
			name:  "a topology failure makes a usable replica",
			hosts: hostsOf("a", "b"),
			ops:   []op{fail("a", Topology)},
			want:  [4]string{"b a", "a b", "a b", "a b"},
		},
		{
			name:  "a server that gives no role is used by no target",
			hosts: hostsOf("a", "b"),
			ops:   []op{conn("a", RoleUnknown), fail("b", Transport)},
			want:  [4]string{"b a", "b a", "b a", "b a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker(tt.hosts, Options{Zone: tt.zone})
			apply(tr, tt.ops)
			s := tr.Snapshot()
			if got := rankings(s); got != tt.want {
				t.Errorf("rankings %q, want %q", got, tt.want)
			}
			for _, target := range allTargets {
				if got := s.Pick(target); got != s.Ranking(target)[0] {
					t.Errorf("%v: Pick %d, Ranking[0] %d", target, got, s.Ranking(target)[0])
				}
				// The ranking is sorted by (state, tier).
				r := s.Ranking(target)
				for n := 1; n < len(r); n++ {
					a, b := r[n-1], r[n]
					ka := [2]int{int(s.State(a, target)), int(tr.tierOf(target, s.Host(a).Zone))}
					kb := [2]int{int(s.State(b, target)), int(tr.tierOf(target, s.Host(b).Zone))}
					if ka[0] > kb[0] || ka[0] == kb[0] && (ka[1] > kb[1] || ka[1] == kb[1] && a > b) {
						t.Errorf("%v: ranking %v out of order at %d", target, r, n)
					}
				}
			}
		})
	}
}

func TestMarkBeforePick(t *testing.T) {
	for _, target := range allTargets {
		role := RolePrimary
		if target == TargetReplica || target == TargetPreferReplica {
			role = RoleReplica
		}
		tr := newTracker(hostsOf("a", "b", "c"), Options{Zone: "eu-1a"})
		tr.ObserveConnect("a", role)
		s := tr.Snapshot()
		first := s.Host(s.Pick(target)).Addr
		if first != "a" {
			t.Fatalf("%v: first pick %s, want a", target, first)
		}
		// The connection to the picked host breaks mid-stream: mark it,
		// then pick again.
		tr.ObserveFailure(first, Transport)
		s = tr.Snapshot()
		next := s.Host(s.Pick(target)).Addr
		if next == first {
			t.Errorf("%v: Pick returned the failed host %s again", target, next)
		}
		tr.ObserveFailure(next, Transient)
		s = tr.Snapshot()
		if got := s.Host(s.Pick(target)).Addr; got != "c" {
			t.Errorf("%v: after two failures Pick %s, want c", target, got)
		}
	}
}

func TestStickyHealthy(t *testing.T) {
	tr := newTracker(hostsOf("a=eu-1a", "b=eu-1b", "c=eu-1a"), Options{Zone: "eu-1a"})
	apply(tr, []op{conn("a", RoleReplica), conn("b", RoleReplica), conn("c", RoleReplica)})
	if got := ranking(tr.Snapshot(), TargetReplica); got != "a c b" {
		t.Fatalf("ranking %q, want %q", got, "a c b")
	}
	// Round after round, the local healthy host stays first while others
	// fail and recover around it.
	rounds := []struct {
		ops    []op
		want   string
		states string
	}{
		{[]op{fail("c", Transport)}, "a b c", "healthy unknown transport-error"},
		{[]op{fail("b", Transient)}, "a b c", "healthy transient-reject transport-error"},
		{[]op{conn("c", RoleReplica)}, "a c b", "healthy transient-reject healthy"},
		{[]op{conn("b", RoleReplica)}, "a c b", "healthy healthy healthy"},
		{[]op{fail("c", Transport)}, "a b c", "healthy unknown transport-error"},
	}
	for n, r := range rounds {
		apply(tr, r.ops)
		s := tr.Snapshot()
		if got := ranking(s, TargetReplica); got != r.want {
			t.Errorf("round %d: ranking %q, want %q", n, got, r.want)
		}
		if got := states(s); got != r.states {
			t.Errorf("round %d: states %q, want %q", n, got, r.states)
		}
		if s.Pick(TargetReplica) != 0 {
			t.Errorf("round %d: Pick %d, want 0 (sticky)", n, s.Pick(TargetReplica))
		}
	}
}

func TestOutageReset(t *testing.T) {
	tests := []struct {
		name   string
		hosts  []HostSpec
		ops    []op
		states string
		outage bool
	}{
		{
			name:   "new outage resets healthy hosts in other zones",
			hosts:  hostsOf("a=eu-1a", "b=eu-1b", "c=eu-1c"),
			ops:    []op{conn("b", RoleReplica), conn("c", RolePrimary), fail("a", Transport)},
			states: "transport-error unknown unknown",
			outage: true,
		},
		{
			name:   "healthy hosts in the same or an unknown zone are kept",
			hosts:  hostsOf("a=eu-1a", "b", "c=eu-1a", "d=eu-1b"),
			ops:    []op{conn("b", RoleReplica), conn("c", RoleReplica), conn("d", RoleReplica), fail("a", Transport)},
			states: "transport-error healthy healthy unknown",
			outage: true,
		},
		{
			name:   "the failing host itself is in another zone",
			hosts:  hostsOf("a=eu-1b", "b=eu-1b"),
			ops:    []op{conn("a", RoleReplica), conn("b", RoleReplica), fail("a", Transient)},
			states: "transient-reject unknown",
			outage: true,
		},
		{
			name:  "no reset within the same outage",
			hosts: hostsOf("a=eu-1a", "b", "c=eu-1a"),
			ops: []op{
				conn("b", RoleReplica), // b healthy, zone unknown
				fail("a", Transport),   // outage begins; b kept (tier unknown)
				zone("b", "eu-1b"),     // b now known to be remote, still healthy
				fail("c", Transport),   // same outage: b is not reset
			},
			states: "transport-error healthy transport-error",
			outage: true,
		},
		{
			name:  "a connect that recovers a host ends the outage; the next failure starts another",
			hosts: hostsOf("a=eu-1a", "b", "c=eu-1a"),
			ops: []op{
				conn("b", RoleReplica), fail("a", Transport), zone("b", "eu-1b"), fail("c", Transport),
				conn("a", RoleReplica), // a recovers: outage over
				fail("c", Transport),   // new outage: b reset
			},
			states: "healthy unknown transport-error",
			outage: true,
		},
		{
			name:   "a host never tried that connects ends no outage",
			hosts:  hostsOf("a=eu-1a", "b=eu-1a"),
			ops:    []op{fail("a", Transport), conn("b", RolePrimary)},
			states: "transport-error healthy",
			outage: true,
		},
		{
			name:  "a connect on a host already healthy does not end the outage",
			hosts: hostsOf("a=eu-1a", "b", "c=eu-1a"),
			ops: []op{
				conn("c", RoleReplica), conn("b", RoleReplica), fail("a", Transport), zone("b", "eu-1b"),
				conn("c", RoleReplica), // nothing recovered
				fail("c", Transport),   // same outage: b is not reset
			},
			states: "transport-error healthy transport-error",
			outage: true,
		},
		{
			name:  "a role change on a healthy host does not end the outage",
			hosts: hostsOf("a=eu-1a", "b", "c=eu-1a"),
			ops: []op{
				conn("c", RoleReplica), conn("b", RoleReplica), fail("a", Transport), zone("b", "eu-1b"),
				conn("c", RolePrimary), // promoted, but it was reachable all along
				fail("a", Transient),
			},
			states: "transient-reject healthy healthy",
			outage: true,
		},
		{
			name:   "terminal and not-failover errors start no outage",
			hosts:  hostsOf("a=eu-1a", "b=eu-1b"),
			ops:    []op{conn("b", RoleReplica), fail("a", Terminal), fail("a", NotFailover)},
			states: "unknown healthy",
			outage: false,
		},
		{
			name:   "topology failures start an outage",
			hosts:  hostsOf("a=eu-1a", "b=eu-1b"),
			ops:    []op{conn("b", RoleReplica), fail("a", Topology)},
			states: "healthy unknown",
			outage: true,
		},
		{
			// Otherwise every probe round of a host that stays down would
			// end the outage and start it again.
			name:   "a connect on a host the reset made unknown ends no outage",
			hosts:  hostsOf("a=eu-1a", "b=eu-1b"),
			ops:    []op{conn("b", RoleReplica), fail("a", Transport), conn("b", RoleReplica)},
			states: "transport-error healthy",
			outage: true,
		},
		{
			name:   "a host back from a failure ends the outage",
			hosts:  hostsOf("a=eu-1a", "b=eu-1b"),
			ops:    []op{conn("b", RoleReplica), fail("a", Transport), conn("a", RolePrimary)},
			states: "healthy unknown",
			outage: false,
		},
		{
			name:  "SetHosts keeps the outage",
			hosts: hostsOf("a=eu-1a", "b"),
			ops: []op{
				conn("b", RoleReplica), fail("a", Transport),
				set("a=eu-1a", "b=eu-1b"), // b is now known to be remote
				fail("a", Transient),      // same outage: b is not reset
			},
			states: "transient-reject healthy",
			outage: true,
		},
		{
			name:   "a failure on a removed host starts no outage",
			hosts:  hostsOf("a=eu-1a", "b=eu-1b"),
			ops:    []op{conn("b", RoleReplica), set("b=eu-1b"), fail("a", Transport)},
			states: "healthy",
			outage: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker(tt.hosts, Options{Zone: "eu-1a"})
			apply(tr, tt.ops)
			s := tr.Snapshot()
			if got := states(s); got != tt.states {
				t.Errorf("states %q, want %q", got, tt.states)
			}
			if s.outage != tt.outage {
				t.Errorf("in outage %v, want %v", s.outage, tt.outage)
			}
		})
	}
}

func TestOutageResetKeepsRoles(t *testing.T) {
	// A remote primary reset to Unknown keeps its role, so writers still
	// rank it ahead of the replicas, and readers still rank it last.
	tr := newTracker(hostsOf("r=eu-1a", "p=eu-1b"), Options{Zone: "eu-1a"})
	apply(tr, []op{conn("p", RolePrimary), conn("r", RoleReplica), fail("r", Transport)})
	s := tr.Snapshot()
	if got := facts(s); got != "r TE/r/- eu-1a, p U/p/- eu-1b" {
		t.Fatalf("facts %q", got)
	}
	if got, want := rankings(s), [4]string{"p r", "p r", "r p", "p r"}; got != want {
		t.Errorf("rankings %q, want %q", got, want)
	}
	if !s.Usable(s.Pick(TargetPrimary), TargetPrimary) {
		t.Error("the reset primary is not usable for writes")
	}
}

func TestPreferReplica(t *testing.T) {
	tr := newTracker(hostsOf("p", "r1", "r2"), Options{})
	steps := []struct {
		do     op
		want   string
		states string // as ranked for TargetPreferReplica
	}{
		{nil, "p r1 r2", "unknown unknown unknown"},
		// Only the primary is known: it is used.
		{conn("p", RolePrimary), "p r1 r2", "healthy unknown unknown"},
		// A replica is usable: the primary goes last.
		{conn("r1", RoleReplica), "r1 r2 p", "topology-reject healthy unknown"},
		// The only known replica is down: the primary ranks by its state.
		{fail("r1", Transport), "p r2 r1", "healthy transport-error unknown"},
		{conn("r2", RoleReplica), "r2 r1 p", "topology-reject transport-error healthy"},
		// A replica that asked to be retried later is not usable now.
		{fail("r2", Transient), "p r2 r1", "healthy transport-error transient-reject"},
		{fail("r2", Transport), "p r1 r2", "healthy transport-error transport-error"},
		// A replica recovers.
		{conn("r1", RoleReplica), "r1 r2 p", "topology-reject healthy transport-error"},
		// The primary fails: it ranks below the replicas either way.
		{fail("p", Transport), "r1 r2 p", "topology-reject healthy transport-error"},
		// A write refused by r1 shows it is a reachable replica.
		{fail("r1", Topology), "r1 r2 p", "topology-reject healthy transport-error"},
		// No replica usable any more: every host ranks by its state.
		{fail("r1", Transport), "p r1 r2", "transport-error transport-error transport-error"},
	}
	for n, st := range steps {
		if st.do != nil {
			st.do(tr)
		}
		s := tr.Snapshot()
		if got := ranking(s, TargetPreferReplica); got != st.want {
			t.Errorf("step %d: ranking %q, want %q", n, got, st.want)
		}
		if got := rankStates(s, TargetPreferReplica); got != st.states {
			t.Errorf("step %d: states %q, want %q", n, got, st.states)
		}
		// The demotion is a ranking; the primary's facts and StateFor
		// are untouched.
		if h := s.Host(0); h.StateFor(TargetPreferReplica) != h.State && h.State != Unknown {
			t.Errorf("step %d: primary StateFor %v, State %v", n, h.StateFor(TargetPreferReplica), h.State)
		}
	}
}

func TestPreferReplicaAfterOutageReset(t *testing.T) {
	// A remote replica reset to Unknown by a new outage still counts as
	// usable: its role is known and Unknown can take a call.
	tr := newTracker(hostsOf("p=eu-1a", "r1=eu-1a", "r2=eu-1b"), Options{Zone: "eu-1a"})
	apply(tr, []op{conn("p", RolePrimary), conn("r1", RoleReplica), conn("r2", RoleReplica), fail("r1", Transport)})
	s := tr.Snapshot()
	if got := states(s); got != "healthy transport-error unknown" {
		t.Fatalf("states %q", got)
	}
	if got := ranking(s, TargetPreferReplica); got != "r2 r1 p" {
		t.Errorf("ranking %q, want %q", got, "r2 r1 p")
	}
}

func TestPreferReplicaClaimed(t *testing.T) {
	// A replica only claimed by the topology source counts too, until the
	// server says otherwise.
	tr := newTracker(hostsOf("p", "r/r"), Options{})
	tr.ObserveConnect("p", RolePrimary)
	if got := ranking(tr.Snapshot(), TargetPreferReplica); got != "r p" {
		t.Errorf("ranking %q, want %q", got, "r p")
	}
	tr.ObserveConnect("r", RolePrimary)
	if got := ranking(tr.Snapshot(), TargetPreferReplica); got != "p r" {
		t.Errorf("after r reports primary: ranking %q, want %q", got, "p r")
	}
}

func TestSetHosts(t *testing.T) {
	tests := []struct {
		name  string
		hosts []HostSpec
		ops   []op
		facts string
		want  [numTargets]string // rankings: read-write, any, read-only, prefer-standby
		gone  []string
	}{
		{
			name:  "staying hosts keep what was learnt, in the new order",
			hosts: hostsOf("a", "b=eu-1b"),
			ops:   []op{conn("a", RolePrimary), fail("b", Transport), zone("a", "eu-1c"), set("b=eu-1b", "a")},
			facts: "b TE/-/- eu-1b, a H/p/- eu-1c",
			want:  [4]string{"a b", "a b", "b a", "a b"},
		},
		{
			name:  "a staying host takes the new claim",
			hosts: hostsOf("a/r", "b"),
			ops:   []op{set("a/p", "b")},
			facts: "a U/-/p -, b U/-/- -",
			want:  [4]string{"a b", "a b", "b a", "a b"},
		},
		{
			name:  "a configured zone replaces the known one; none keeps it",
			hosts: hostsOf("a", "b"),
			ops:   []op{zone("a", "eu-1b"), zone("b", "eu-1b"), set("b", "a=eu-1a")},
			facts: "b U/-/- eu-1b, a U/-/- eu-1a",
			want:  [4]string{"b a", "a b", "a b", "a b"},
		},
		{
			name:  "new hosts start Unknown with their claimed roles",
			hosts: hostsOf("a"),
			ops:   []op{conn("a", RolePrimary), set("a", "b/r", "c/p", "d")},
			facts: "a H/p/- -, b U/-/r -, c U/-/p -, d U/-/- -",
			want:  [4]string{"a c d b", "a b c d", "b d a c", "b d a c"},
		},
		{
			name:  "the server's report overrides the claim",
			hosts: hostsOf("a/r", "b/p"),
			ops:   []op{conn("a", RolePrimary), conn("b", RoleReplica), set("a/r", "b/p")},
			facts: "a H/p/r -, b H/r/p -",
			want:  [4]string{"a b", "a b", "b a", "b a"},
		},
		{
			name:  "removed hosts are forgotten",
			hosts: hostsOf("a", "b", "c"),
			ops:   []op{conn("b", RoleReplica), fail("c", Transport), set("a", "c")},
			facts: "a U/-/- -, c TE/-/- -",
			want:  [4]string{"a c", "a c", "a c", "a c"},
			gone:  []string{"b"},
		},
		{
			name:  "a host removed and added again starts over",
			hosts: hostsOf("a", "b"),
			ops:   []op{conn("b", RoleReplica), set("a"), set("a", "b/p")},
			facts: "a U/-/- -, b U/-/p -",
			want:  [4]string{"a b", "a b", "a b", "a b"},
		},
		{
			name:  "observations on removed hosts are ignored",
			hosts: hostsOf("a", "b"),
			ops: []op{
				set("a"), conn("b", RolePrimary), fail("b", Transport), fail("b", Topology), zone("b", "eu-1a"),
				set("a", "b"),
			},
			facts: "a U/-/- -, b U/-/- -",
			want:  [4]string{"a b", "a b", "a b", "a b"},
		},
		{
			name:  "duplicates: the first entry wins",
			hosts: hostsOf("a", "a/p"),
			ops:   []op{set("a=eu-1b/r", "b", "a=eu-1a/p")},
			facts: "a U/-/r eu-1b, b U/-/- -",
			want:  [4]string{"b a", "b a", "b a", "b a"},
		},
		{
			name:  "to no hosts",
			hosts: hostsOf("a", "b"),
			ops:   []op{conn("a", RolePrimary), set()},
			facts: "",
			gone:  []string{"a", "b"},
		},
		{
			name:  "from no hosts",
			ops:   []op{set("a/p", "b=eu-1a")},
			facts: "a U/-/p -, b U/-/- eu-1a",
			want:  [4]string{"a b", "b a", "b a", "b a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker(tt.hosts, Options{Zone: "eu-1a"})
			apply(tr, tt.ops)
			s := tr.Snapshot()
			if got := facts(s); got != tt.facts {
				t.Errorf("facts %q, want %q", got, tt.facts)
			}
			if got := rankings(s); got != tt.want {
				t.Errorf("rankings %q, want %q", got, tt.want)
			}
			for i, h := range s.Hosts() {
				if j, ok := s.Lookup(h.Addr); !ok || j != i {
					t.Errorf("Lookup(%s) = %d, %v, want %d", h.Addr, j, ok, i)
				}
			}
			for _, addr := range tt.gone {
				if i, ok := s.Lookup(addr); ok {
					t.Errorf("removed host %s still at %d", addr, i)
				}
			}
			if s.Len() == 0 {
				for _, target := range allTargets {
					if p := s.Pick(target); p != -1 {
						t.Errorf("%v: Pick %d with no hosts", target, p)
					}
				}
			}
		})
	}
}

func TestSetHostsCopiesHosts(t *testing.T) {
	hosts := hostsOf("a=eu-1a", "b")
	tr := newTracker(hosts, Options{Zone: "eu-1a"})
	hosts[0] = HostSpec{Addr: "x", Zone: "eu-1b"}
	hosts = hostsOf("c", "d")
	tr.SetHosts(hosts)
	hosts[0].Addr = "y"
	if got := facts(tr.Snapshot()); got != "c U/-/- -, d U/-/- -" {
		t.Errorf("tracker saw a change to the caller's slice: %q", got)
	}
}

func TestChanged(t *testing.T) {
	// In an outage: a is a healthy primary, b a replica that failed.
	inOutage := []op{conn("a", RolePrimary), conn("b", RoleReplica), fail("b", Transport)}
	// Not in an outage: b failed, then recovered.
	calm := []op{fail("b", Transport), conn("b", RoleReplica)}
	tests := []struct {
		name    string
		setup   []op
		do      op
		changed bool
	}{
		{"connect, same role", inOutage, conn("a", RolePrimary), false},
		{"connect, new role", inOutage, conn("a", RoleReplica), true},
		{"connect recovers", inOutage, conn("b", RoleReplica), true},
		{"same failure in the outage", inOutage, fail("b", Transport), false},
		{"other failure", inOutage, fail("b", Transient), true},
		{"not-failover", inOutage, fail("a", NotFailover), false},
		{"terminal", inOutage, fail("a", Terminal), false},
		{"topology on a replica already healthy", []op{conn("a", RolePrimary), fail("b", Topology)}, fail("b", Topology), false},
		{"topology on a primary", inOutage, fail("a", Topology), true},
		{"same zone", inOutage, zone("a", "eu-1a"), false},
		{"no zone", inOutage, zone("a", ""), false},
		{"new zone", inOutage, zone("a", "eu-1c"), true},
		{"connect on an unknown address", inOutage, conn("x", RolePrimary), false},
		{"failure on an unknown address", inOutage, fail("x", Transport), false},
		{"failure on an unknown address, no outage", calm, fail("x", Transport), false},
		{"zone on an unknown address", inOutage, zone("x", "eu-1b"), false},
		{"SetHosts adds a host", inOutage, set("a=eu-1a", "b=eu-1b", "c"), true},
		{"SetHosts removes a host", inOutage, set("a=eu-1a"), true},
		// The host's facts stay, but an outage begins: the next failure
		// will not reset the remote hosts again.
		{"same failure starts an outage", calm, fail("b", Transport), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker(hostsOf("a=eu-1a", "b=eu-1b"), Options{Zone: "eu-1a"})
			apply(tr, tt.setup)
			before := tr.Snapshot()
			tt.do(tr)
			if got := tr.Snapshot() != before; got != tt.changed {
				t.Errorf("new state %v, want %v", got, tt.changed)
			}
		})
	}
}

func TestSnapshotIsImmutable(t *testing.T) {
	tr := newTracker(hostsOf("a=eu-1a", "b=eu-1b", "c"), Options{Zone: "eu-1a"})
	apply(tr, []op{conn("a", RolePrimary), conn("b", RoleReplica)})
	old := tr.Snapshot()
	hosts := old.Hosts()
	wantFacts, wantRankings := facts(old), rankings(old)
	var orders [numTargets][]int
	var rstates [numTargets]string
	for _, target := range allTargets {
		orders[target] = slices.Clone(old.Ranking(target))
		rstates[target] = rankStates(old, target)
	}

	apply(tr, []op{
		fail("a", Transport), conn("c", RoleReplica), zone("c", "eu-1b"), fail("b", Topology),
		set("c", "d/p", "a"), conn("d", RolePrimary),
	})

	if got := facts(old); got != wantFacts {
		t.Errorf("old snapshot's facts changed from %q to %q", wantFacts, got)
	}
	if got := rankings(old); got != wantRankings {
		t.Errorf("old snapshot's rankings changed from %q to %q", wantRankings, got)
	}
	for _, target := range allTargets {
		if !slices.Equal(old.Ranking(target), orders[target]) {
			t.Errorf("%v: an earlier Ranking changed from %v to %v", target, orders[target], old.Ranking(target))
		}
		if got := rankStates(old, target); got != rstates[target] {
			t.Errorf("%v: old states changed from %q to %q", target, rstates[target], got)
		}
	}
	if i, ok := old.Lookup("b"); !ok || i != 1 || old.Len() != 3 {
		t.Errorf("old snapshot: Lookup(b) %d %v, Len %d", i, ok, old.Len())
	}
	if hosts[0].State != Healthy {
		t.Errorf("an earlier Hosts copy changed: %v", hosts[0].State)
	}
	// c's connect was no recovery (it was only unknown), so the outage a's
	// failure began goes on, b's refusal begins none, and c stays healthy.
	if got, want := facts(tr.Snapshot()), "c H/r/- eu-1b, d H/p/p -, a TE/p/- eu-1a"; got != want {
		t.Errorf("new facts %q, want %q", got, want)
	}
	// Hosts returns a copy the caller may change.
	hosts = tr.Snapshot().Hosts()
	hosts[2].State = Healthy
	if tr.Snapshot().Host(2).State != TransportError {
		t.Error("modifying Hosts' result changed the snapshot")
	}
}

func TestEmptyTracker(t *testing.T) {
	tr := newTracker(nil, Options{})
	apply(tr, []op{conn("a", RolePrimary), fail("a", Transport), zone("a", "eu-1a")})
	s := tr.Snapshot()
	if s.Len() != 0 || len(s.Hosts()) != 0 {
		t.Errorf("empty tracker: Len %d Hosts %v", s.Len(), s.Hosts())
	}
	for _, target := range allTargets {
		if s.Pick(target) != -1 || len(s.Ranking(target)) != 0 {
			t.Errorf("%v: Pick %d Ranking %v", target, s.Pick(target), s.Ranking(target))
		}
	}
	if _, ok := s.Lookup("a"); ok {
		t.Error("Lookup found a host in an empty tracker")
	}
}

func TestIndexOutOfRangePanics(t *testing.T) {
	s := newTracker(hostsOf("a", "b", "c"), Options{}).Snapshot()
	calls := map[string]func(){
		"Host":   func() { s.Host(3) },
		"State":  func() { s.State(-1, TargetAny) },
		"Usable": func() { s.Usable(3, TargetPrimary) },
	}
	for name, call := range calls {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with a bad index did not panic", name)
				}
			}()
			call()
		}()
	}
}

func TestReadersDoNotAllocate(t *testing.T) {
	tr := newTracker(hostsOf("a=eu-1a", "b=eu-1b", "c"), Options{Zone: "eu-1a"})
	apply(tr, []op{conn("a", RoleReplica), conn("b", RoleReplica), conn("c", RoleReplica)})
	tr2 := newTracker(hostsOf("a", "b"), Options{})
	apply(tr2, []op{fail("a", Transport)})
	calls := map[string]func(){
		"Pick":                             func() { _ = tr.Snapshot().Pick(TargetReplica) },
		"Ranking":                          func() { _ = tr.Snapshot().Ranking(TargetPreferReplica) },
		"State":                            func() { _ = tr.Snapshot().State(1, TargetAny) },
		"Usable":                           func() { _ = tr.Snapshot().Usable(1, TargetPrimary) },
		"Host":                             func() { _ = tr.Snapshot().Host(1) },
		"Lookup":                           func() { _, _ = tr.Snapshot().Lookup("b") },
		"Len":                              func() { _ = tr.Snapshot().Len() },
		"StateFor":                         func() { _ = tr.Snapshot().Host(0).StateFor(TargetPrimary) },
		"ObserveConnect unchanged":         func() { tr.ObserveConnect("a", RoleReplica) },
		"ObserveConnect unknown address":   func() { tr.ObserveConnect("x", RoleReplica) },
		"ObserveZone unchanged":            func() { tr.ObserveZone("b", "eu-1b") },
		"ObserveZone empty":                func() { tr.ObserveZone("b", "") },
		"ObserveZone unknown address":      func() { tr.ObserveZone("x", "eu-1a") },
		"ObserveFailure not-failover":      func() { tr.ObserveFailure("b", NotFailover) },
		"ObserveFailure unknown address":   func() { tr.ObserveFailure("x", Transport) },
		"ObserveFailure same in outage":    func() { tr2.ObserveFailure("a", Transport) },
		"ObserveFailure unknown, outage":   func() { tr2.ObserveFailure("x", Transient) },
		"ObserveFailure topology, unknown": func() { tr2.ObserveFailure("x", Topology) },
	}
	for name, call := range calls {
		if n := testing.AllocsPerRun(100, call); n != 0 {
			t.Errorf("%s: %v allocs, want 0", name, n)
		}
	}
}

// checkSnapshot reports what is wrong with s, or "".
func checkSnapshot(tr *tracker, s *Snapshot) string {
	n := s.Len()
	seen := make([]bool, n)
	for i, h := range s.Hosts() {
		if j, ok := s.Lookup(h.Addr); !ok || j != i {
			return fmt.Sprintf("Lookup(%s) = %d, %v, want %d", h.Addr, j, ok, i)
		}
	}
	for _, target := range allTargets {
		r := s.Ranking(target)
		if len(r) != n {
			return fmt.Sprintf("%v: ranking %v for %d hosts", target, r, n)
		}
		if n > 0 && s.Pick(target) != r[0] {
			return fmt.Sprintf("%v: Pick %d, ranking %v", target, s.Pick(target), r)
		}
		clear(seen)
		prev := -1
		for _, i := range r {
			if i < 0 || i >= n || seen[i] {
				return fmt.Sprintf("%v: ranking %v is not a permutation", target, r)
			}
			seen[i] = true
			k := int(s.State(i, target))*numTiers + int(tr.tierOf(target, s.Host(i).Zone))
			if k < prev {
				return fmt.Sprintf("%v: ranking %v out of order", target, r)
			}
			prev = k
		}
	}
	return ""
}
