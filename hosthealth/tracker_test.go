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

// op is one observation fed to a tracker.
type op func(*Tracker)

func conn(i int, r Role) op   { return func(t *Tracker) { t.ObserveConnect(i, r) } }
func fail(i int, c Class) op  { return func(t *Tracker) { t.ObserveFailure(i, c) } }
func zone(i int, z string) op { return func(t *Tracker) { t.ObserveZone(i, z) } }
func apply(t *Tracker, ops []op) {
	for _, o := range ops {
		o(t)
	}
}

// hostsOf builds hosts named by letters: hostsOf("a", "b=eu-1b") gives
// a with no zone and b in eu-1b.
func hostsOf(specs ...string) []Host {
	hs := make([]Host, len(specs))
	for i, s := range specs {
		addr, z, _ := strings.Cut(s, "=")
		hs[i] = Host{Addr: addr, Zone: z}
	}
	return hs
}

// ranking returns the addresses of t's hosts best first, space-separated.
func ranking(t *Tracker) string {
	var b strings.Builder
	for n, i := range t.Ranking() {
		if n > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.Status(i).Addr)
	}
	return b.String()
}

// states returns every host's state in DSN order, space-separated.
func states(t *Tracker) string {
	var b strings.Builder
	for n, h := range t.Statuses() {
		if n > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(h.State.String())
	}
	return b.String()
}

func (t *Tracker) inOutage() bool { return t.snap.Load().outage }

func TestTransitions(t *testing.T) {
	const (
		H   = Healthy
		U   = Unknown
		TR  = TransientReject
		TE  = TransportError
		TOP = TopologyReject
	)
	// Ways to bring a single host into each starting state.
	from := []struct {
		name  string
		state State
		setup []op
	}{
		{"healthy", H, nil}, // filled per target below
		{"unknown", U, nil},
		{"transient-reject", TR, []op{fail(0, Transient)}},
		{"transport-error", TE, []op{fail(0, Transport)}},
		{"topology-reject", TOP, []op{fail(0, Topology)}},
	}
	type row struct {
		event string
		do    op
		want  [5]State // indexed like from
	}
	same := [5]State{H, U, TR, TE, TOP}
	all := func(s State) [5]State { return [5]State{s, s, s, s, s} }
	tests := []struct {
		target  Target
		healthy Role // a role that makes the host Healthy under target
		rows    []row
	}{
		{TargetPrimary, RolePrimary, []row{
			{"connect primary", conn(0, RolePrimary), all(H)},
			{"connect replica", conn(0, RoleReplica), all(TOP)},
			{"connect unknown role", conn(0, RoleUnknown), all(TOP)},
			{"fail not-failover", fail(0, NotFailover), same},
			{"fail terminal", fail(0, Terminal), same},
			{"fail topology", fail(0, Topology), all(TOP)},
			{"fail transient", fail(0, Transient), all(TR)},
			{"fail transport", fail(0, Transport), all(TE)},
		}},
		{TargetReplica, RoleReplica, []row{
			{"connect primary", conn(0, RolePrimary), all(TOP)},
			{"connect replica", conn(0, RoleReplica), all(H)},
			{"connect unknown role", conn(0, RoleUnknown), all(TOP)},
			{"fail not-failover", fail(0, NotFailover), same},
			{"fail terminal", fail(0, Terminal), same},
			{"fail topology", fail(0, Topology), all(TOP)},
			{"fail transient", fail(0, Transient), all(TR)},
			{"fail transport", fail(0, Transport), all(TE)},
		}},
		{TargetAny, RolePrimary, []row{
			{"connect primary", conn(0, RolePrimary), all(H)},
			{"connect replica", conn(0, RoleReplica), all(H)},
			{"connect unknown role", conn(0, RoleUnknown), all(TOP)},
			{"fail not-failover", fail(0, NotFailover), same},
			{"fail terminal", fail(0, Terminal), same},
			{"fail topology", fail(0, Topology), all(TOP)},
			{"fail transient", fail(0, Transient), all(TR)},
			{"fail transport", fail(0, Transport), all(TE)},
		}},
		{TargetPreferReplica, RoleReplica, []row{
			{"connect primary", conn(0, RolePrimary), all(H)},
			{"connect replica", conn(0, RoleReplica), all(H)},
			{"connect unknown role", conn(0, RoleUnknown), all(TOP)},
			{"fail not-failover", fail(0, NotFailover), same},
			{"fail terminal", fail(0, Terminal), same},
			{"fail topology", fail(0, Topology), all(TOP)},
			{"fail transient", fail(0, Transient), all(TR)},
			{"fail transport", fail(0, Transport), all(TE)},
		}},
	}
	for _, tt := range tests {
		for _, r := range tt.rows {
			for k, f := range from {
				setup := f.setup
				if f.state == Healthy {
					setup = []op{conn(0, tt.healthy)}
				}
				name := fmt.Sprintf("%v/%s/%s", tt.target, f.name, r.event)
				tr := NewTracker(hostsOf("a"), Options{Target: tt.target})
				apply(tr, setup)
				if got := tr.Status(0).State; got != f.state {
					t.Fatalf("%s: setup gave %v, want %v", name, got, f.state)
				}
				r.do(tr)
				if got := tr.Status(0).State; got != r.want[k] {
					t.Errorf("%s: got %v, want %v", name, got, r.want[k])
				}
			}
		}
	}
}

func TestRoleTracking(t *testing.T) {
	tr := NewTracker(hostsOf("a", "b"), Options{Target: TargetPrimary})
	if got := tr.Role(0); got != RoleUnknown {
		t.Fatalf("initial role %v, want unknown", got)
	}
	tr.ObserveConnect(0, RolePrimary)
	for _, c := range []Class{Transport, Transient, Topology, Terminal, NotFailover} {
		tr.ObserveFailure(0, c)
		if got := tr.Role(0); got != RolePrimary {
			t.Errorf("after %v failure: role %v, want primary (kept)", c, got)
		}
	}
	// The old primary comes back as a standby.
	tr.ObserveConnect(0, RoleReplica)
	if s := tr.Status(0); s.Role != RoleReplica || s.State != TopologyReject {
		t.Errorf("demoted primary: %v/%v, want replica/topology-reject", s.Role, s.State)
	}
	tr.ObserveConnect(1, RolePrimary)
	if s := tr.Status(1); s.Role != RolePrimary || s.State != Healthy {
		t.Errorf("promoted replica: %v/%v, want primary/healthy", s.Role, s.State)
	}
}

func TestSince(t *testing.T) {
	clk := newFakeClock()
	t0 := clk.Now()
	tr := NewTracker(hostsOf("a", "b"), Options{Target: TargetAny, Now: clk.Now})
	for i := range 2 {
		if got := tr.Status(i).Since; !got.Equal(t0) {
			t.Fatalf("host %d: initial Since %v, want %v", i, got, t0)
		}
	}
	steps := []struct {
		do    op
		state State
		since int // which clock reading Since must equal: index into the readings so far
	}{
		{conn(0, RolePrimary), Healthy, 1},
		{conn(0, RolePrimary), Healthy, 1},      // no change, Since stays
		{conn(0, RoleReplica), Healthy, 1},      // role changed, state did not
		{fail(0, NotFailover), Healthy, 1},      // ignored
		{fail(0, Terminal), Healthy, 1},         // ignored
		{fail(0, Transport), TransportError, 6}, // changed
		{fail(0, Transport), TransportError, 6}, // same state again
		{zone(0, "eu-1a"), TransportError, 6},   // zone is not state
		{fail(0, Transient), TransientReject, 9},
		{conn(0, RolePrimary), Healthy, 10},
	}
	readings := []time.Time{t0}
	for n, st := range steps {
		readings = append(readings, clk.Advance(time.Second))
		st.do(tr)
		got := tr.Status(0)
		if got.State != st.state || !got.Since.Equal(readings[st.since]) {
			t.Errorf("step %d: %v since %v, want %v since %v", n, got.State, got.Since, st.state, readings[st.since])
		}
	}
	if got := tr.Status(1).Since; !got.Equal(t0) {
		t.Errorf("untouched host: Since %v, want %v", got, t0)
	}
}

func TestNilClockUsesTimeNow(t *testing.T) {
	before := time.Now()
	tr := NewTracker(hostsOf("a"), Options{})
	if s := tr.Status(0).Since; s.Before(before) || s.After(time.Now()) {
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
		// Configured zone.
		tr := NewTracker([]Host{{Addr: "a", Zone: tt.hostZone}}, Options{Target: tt.target, Zone: tt.clientZone})
		if got := tr.Status(0).Tier; got != tt.want {
			t.Errorf("%v client %q, configured %q: tier %v, want %v", tt.target, tt.clientZone, tt.hostZone, got, tt.want)
		}
		// Advertised zone.
		tr = NewTracker([]Host{{Addr: "a"}}, Options{Target: tt.target, Zone: tt.clientZone})
		tr.ObserveZone(0, tt.hostZone)
		if got := tr.Status(0).Tier; got != tt.want {
			t.Errorf("%v client %q, advertised %q: tier %v, want %v", tt.target, tt.clientZone, tt.hostZone, got, tt.want)
		}
	}
}

func TestObserveZone(t *testing.T) {
	tr := NewTracker(hostsOf("a", "b=eu-1a"), Options{Target: TargetReplica, Zone: "eu-1a"})
	steps := []struct {
		do   op
		host int
		zone string
		tier Tier
	}{
		{nil, 0, "", TierUnknown},
		{nil, 1, "eu-1a", TierSame},
		{zone(0, "eu-1b"), 0, "eu-1b", TierOther},
		{zone(0, ""), 0, "eu-1b", TierOther}, // nothing advertised: keep
		{zone(0, "EU-1A"), 0, "EU-1A", TierSame},
		{zone(1, "eu-1c"), 1, "eu-1c", TierOther}, // advertised beats configured
		{zone(1, ""), 1, "eu-1c", TierOther},
	}
	for n, st := range steps {
		if st.do != nil {
			st.do(tr)
		}
		s := tr.Status(st.host)
		if s.Zone != st.zone || s.Tier != st.tier {
			t.Errorf("step %d: host %d zone %q tier %v, want %q %v", n, st.host, s.Zone, s.Tier, st.zone, st.tier)
		}
	}
}

func TestRanking(t *testing.T) {
	tests := []struct {
		name   string
		hosts  []Host
		opts   Options
		ops    []op
		want   string
		states string // optional
	}{
		{
			name:  "fresh tracker keeps DSN order",
			hosts: hostsOf("a", "b", "c"),
			want:  "a b c",
		},
		{
			name:  "lattice order",
			hosts: hostsOf("a", "b", "c", "d", "e"),
			opts:  Options{Target: TargetAny},
			ops: []op{
				conn(4, RolePrimary), fail(2, Transient), fail(1, Transport), fail(0, Topology),
			},
			want:   "e d c b a",
			states: "topology-reject transport-error transient-reject unknown healthy",
		},
		{
			name:  "ties keep DSN order",
			hosts: hostsOf("a", "b", "c", "d", "e"),
			opts:  Options{Target: TargetAny},
			ops: []op{
				fail(0, Transport), fail(2, Transport), conn(3, RoleReplica), conn(1, RolePrimary),
			},
			want: "b d e a c",
		},
		{
			name:  "zone tier orders equal states",
			hosts: hostsOf("a=eu-1b", "b", "c=eu-1a"),
			opts:  Options{Target: TargetReplica, Zone: "eu-1a"},
			want:  "c b a",
		},
		{
			name:  "zone tier orders healthy hosts",
			hosts: hostsOf("a=eu-1b", "b", "c=eu-1a", "d=EU-1A"),
			opts:  Options{Target: TargetReplica, Zone: "eu-1a"},
			ops:   []op{conn(0, RoleReplica), conn(1, RoleReplica), conn(2, RoleReplica), conn(3, RoleReplica)},
			want:  "c d b a",
		},
		{
			name:  "state beats tier",
			hosts: hostsOf("a=eu-1a", "b=eu-1b"),
			opts:  Options{Target: TargetReplica, Zone: "eu-1a"},
			ops:   []op{fail(0, Transient), conn(1, RoleReplica)},
			want:  "b a",
		},
		{
			name:  "primary target ignores zones",
			hosts: hostsOf("a=eu-1b", "b=eu-1a", "c"),
			opts:  Options{Target: TargetPrimary, Zone: "eu-1a"},
			want:  "a b c",
		},
		{
			name:  "client without zone ignores zones",
			hosts: hostsOf("a=eu-1b", "b=eu-1a", "c"),
			opts:  Options{Target: TargetReplica},
			want:  "a b c",
		},
		{
			name:  "wrong role ranks last",
			hosts: hostsOf("a", "b", "c"),
			opts:  Options{Target: TargetPrimary},
			ops:   []op{conn(0, RoleReplica), conn(1, RoleReplica), fail(2, Transport)},
			want:  "c a b",
		},
		{
			name:  "failover: the promoted replica is first",
			hosts: hostsOf("a", "b", "c"),
			ops: []op{
				conn(0, RolePrimary), conn(1, RoleReplica), conn(2, RoleReplica),
				fail(0, Transport), conn(1, RolePrimary),
			},
			want:   "b a c",
			states: "transport-error healthy topology-reject",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(tt.hosts, tt.opts)
			apply(tr, tt.ops)
			if got := ranking(tr); got != tt.want {
				t.Errorf("ranking %q, want %q", got, tt.want)
			}
			if tt.states != "" {
				if got := states(tr); got != tt.states {
					t.Errorf("states %q, want %q", got, tt.states)
				}
			}
			if got := tr.Pick(); got != tr.Ranking()[0] {
				t.Errorf("Pick %d, Ranking()[0] %d", got, tr.Ranking()[0])
			}
		})
	}
}

func TestMarkBeforePick(t *testing.T) {
	for _, target := range []Target{TargetPrimary, TargetAny, TargetReplica, TargetPreferReplica} {
		role := RolePrimary
		if target == TargetReplica || target == TargetPreferReplica {
			role = RoleReplica
		}
		tr := NewTracker(hostsOf("a", "b", "c"), Options{Target: target, Zone: "eu-1a"})
		tr.ObserveConnect(0, role)
		first := tr.Pick()
		if first != 0 {
			t.Fatalf("%v: first pick %d, want 0", target, first)
		}
		// The connection to the picked host breaks mid-stream: mark it,
		// then pick again.
		tr.ObserveFailure(first, Transport)
		if next := tr.Pick(); next == first {
			t.Errorf("%v: Pick returned the failed host %d again", target, next)
		}
		tr.ObserveFailure(tr.Pick(), Transient)
		if next := tr.Pick(); next != 2 {
			t.Errorf("%v: after two failures Pick %d, want 2", target, next)
		}
	}
}

func TestStickyHealthy(t *testing.T) {
	tr := NewTracker(hostsOf("a=eu-1a", "b=eu-1b", "c=eu-1a"), Options{Target: TargetReplica, Zone: "eu-1a"})
	apply(tr, []op{conn(0, RoleReplica), conn(1, RoleReplica), conn(2, RoleReplica)})
	if got := ranking(tr); got != "a c b" {
		t.Fatalf("ranking %q, want %q", got, "a c b")
	}
	// Round after round, the local healthy host stays first while others
	// fail and recover around it.
	rounds := []struct {
		ops    []op
		want   string
		states string
	}{
		{[]op{fail(2, Transport)}, "a b c", "healthy unknown transport-error"},
		{[]op{fail(1, Transient)}, "a b c", "healthy transient-reject transport-error"},
		{[]op{conn(2, RoleReplica)}, "a c b", "healthy transient-reject healthy"},
		{[]op{conn(1, RoleReplica)}, "a c b", "healthy healthy healthy"},
		{[]op{fail(2, Transport)}, "a b c", "healthy unknown transport-error"},
	}
	for n, r := range rounds {
		apply(tr, r.ops)
		if got := ranking(tr); got != r.want {
			t.Errorf("round %d: ranking %q, want %q", n, got, r.want)
		}
		if got := states(tr); got != r.states {
			t.Errorf("round %d: states %q, want %q", n, got, r.states)
		}
		if tr.Pick() != 0 {
			t.Errorf("round %d: Pick %d, want 0 (sticky)", n, tr.Pick())
		}
	}
}

func TestOutageReset(t *testing.T) {
	tests := []struct {
		name   string
		hosts  []Host
		ops    []op
		states string
		outage bool
	}{
		{
			name:   "new outage resets healthy hosts in other zones",
			hosts:  hostsOf("a=eu-1a", "b=eu-1b", "c=eu-1c"),
			ops:    []op{conn(1, RoleReplica), conn(2, RoleReplica), fail(0, Transport)},
			states: "transport-error unknown unknown",
			outage: true,
		},
		{
			name:   "healthy hosts in the same or an unknown zone are kept",
			hosts:  hostsOf("a=eu-1a", "b", "c=eu-1a", "d=eu-1b"),
			ops:    []op{conn(1, RoleReplica), conn(2, RoleReplica), conn(3, RoleReplica), fail(0, Transport)},
			states: "transport-error healthy healthy unknown",
			outage: true,
		},
		{
			name:   "the failing host itself is in another zone",
			hosts:  hostsOf("a=eu-1b", "b=eu-1b"),
			ops:    []op{conn(0, RoleReplica), conn(1, RoleReplica), fail(0, Transient)},
			states: "transient-reject unknown",
			outage: true,
		},
		{
			name:  "no reset within the same outage",
			hosts: hostsOf("a=eu-1a", "b", "c=eu-1a"),
			ops: []op{
				conn(1, RoleReplica), // b healthy, zone unknown
				fail(0, Transport),   // outage begins; b kept (tier unknown)
				zone(1, "eu-1b"),     // b now known to be remote, still healthy
				fail(2, Transport),   // same outage: b is not reset
			},
			states: "transport-error healthy transport-error",
			outage: true,
		},
		{
			name:  "a healthy connect ends the outage; the next failure starts another",
			hosts: hostsOf("a=eu-1a", "b", "c=eu-1a"),
			ops: []op{
				conn(1, RoleReplica), fail(0, Transport), zone(1, "eu-1b"), fail(2, Transport),
				conn(0, RoleReplica), // a recovers: outage over
				fail(2, Transport),   // new outage: b reset
			},
			states: "healthy unknown transport-error",
			outage: true,
		},
		{
			name:  "a wrong-role connect does not end the outage",
			hosts: hostsOf("a=eu-1a", "b", "c=eu-1a"),
			ops: []op{
				conn(1, RoleReplica), fail(0, Transport), zone(1, "eu-1b"),
				conn(2, RolePrimary), // reachable, wrong role: still the same outage
				fail(0, Transport),
			},
			states: "transport-error healthy topology-reject",
			outage: true,
		},
		{
			name:   "terminal and not-failover errors start no outage",
			hosts:  hostsOf("a=eu-1a", "b=eu-1b"),
			ops:    []op{conn(1, RoleReplica), fail(0, Terminal), fail(0, NotFailover)},
			states: "unknown healthy",
			outage: false,
		},
		{
			name:   "topology failures start an outage",
			hosts:  hostsOf("a=eu-1a", "b=eu-1b"),
			ops:    []op{conn(1, RoleReplica), fail(0, Topology)},
			states: "topology-reject unknown",
			outage: true,
		},
		{
			name:   "healthy connect after the reset",
			hosts:  hostsOf("a=eu-1a", "b=eu-1b"),
			ops:    []op{conn(1, RoleReplica), fail(0, Transport), conn(1, RoleReplica)},
			states: "transport-error healthy",
			outage: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(tt.hosts, Options{Target: TargetReplica, Zone: "eu-1a"})
			apply(tr, tt.ops)
			if got := states(tr); got != tt.states {
				t.Errorf("states %q, want %q", got, tt.states)
			}
			if got := tr.inOutage(); got != tt.outage {
				t.Errorf("in outage %v, want %v", got, tt.outage)
			}
		})
	}
}

func TestPrimaryTargetNeverResets(t *testing.T) {
	// Under the primary target every host is in TierSame, so an outage
	// never resets the primary.
	tr := NewTracker(hostsOf("a=eu-1b", "b=eu-1a"), Options{Target: TargetPrimary, Zone: "eu-1a"})
	apply(tr, []op{conn(0, RolePrimary), fail(1, Transport)})
	if got := states(tr); got != "healthy transport-error" {
		t.Errorf("states %q", got)
	}
}

func TestPreferReplica(t *testing.T) {
	tr := NewTracker(hostsOf("p", "r1", "r2"), Options{Target: TargetPreferReplica})
	steps := []struct {
		do     op
		want   string
		states string
	}{
		{nil, "p r1 r2", "unknown unknown unknown"},
		// Only the primary is known: it is used.
		{conn(0, RolePrimary), "p r1 r2", "healthy unknown unknown"},
		// A replica is usable: the primary goes last but stays Healthy.
		{conn(1, RoleReplica), "r1 r2 p", "healthy healthy unknown"},
		// The only known replica is down: the primary ranks by its state.
		{fail(1, Transport), "p r2 r1", "healthy transport-error unknown"},
		{conn(2, RoleReplica), "r2 r1 p", "healthy transport-error healthy"},
		// A replica that asked to be retried later still counts as usable.
		{fail(2, Transient), "r2 r1 p", "healthy transport-error transient-reject"},
		// No replica usable any more.
		{fail(2, Transport), "p r1 r2", "healthy transport-error transport-error"},
		// A replica recovers.
		{conn(1, RoleReplica), "r1 r2 p", "healthy healthy transport-error"},
		// The primary fails: it ranks below the replicas either way.
		{fail(0, Transport), "r1 r2 p", "transport-error healthy transport-error"},
		// A replica rejected on topology grounds is not usable.
		{fail(1, Topology), "p r2 r1", "transport-error topology-reject transport-error"},
	}
	for n, st := range steps {
		if st.do != nil {
			st.do(tr)
		}
		if got := ranking(tr); got != st.want {
			t.Errorf("step %d: ranking %q, want %q", n, got, st.want)
		}
		if got := states(tr); got != st.states {
			t.Errorf("step %d: states %q, want %q", n, got, st.states)
		}
	}
}

func TestPreferReplicaAfterOutageReset(t *testing.T) {
	// A remote replica reset to Unknown by a new outage still counts as
	// usable: its role is known and Unknown is better than TransportError.
	tr := NewTracker(hostsOf("p=eu-1a", "r1=eu-1a", "r2=eu-1b"), Options{Target: TargetPreferReplica, Zone: "eu-1a"})
	apply(tr, []op{conn(0, RolePrimary), conn(1, RoleReplica), conn(2, RoleReplica), fail(1, Transport)})
	if got := states(tr); got != "healthy transport-error unknown" {
		t.Fatalf("states %q", got)
	}
	if got := ranking(tr); got != "r2 r1 p" {
		t.Errorf("ranking %q, want %q", got, "r2 r1 p")
	}
}

func TestPreferReplicaOnlyAffectsThatTarget(t *testing.T) {
	for _, target := range []Target{TargetAny, TargetPrimary, TargetReplica} {
		tr := NewTracker(hostsOf("p", "r"), Options{Target: target})
		apply(tr, []op{conn(0, RolePrimary), conn(1, RoleReplica)})
		want := map[Target]string{TargetAny: "p r", TargetPrimary: "p r", TargetReplica: "r p"}[target]
		if got := ranking(tr); got != want {
			t.Errorf("%v: ranking %q, want %q", target, got, want)
		}
	}
}

func TestRankingIsASnapshot(t *testing.T) {
	tr := NewTracker(hostsOf("a", "b", "c"), Options{Target: TargetAny})
	before := tr.Ranking()
	saved := slices.Clone(before)
	statuses := tr.Statuses()
	tr.ObserveFailure(0, Transport)
	tr.ObserveConnect(2, RoleReplica)
	if !slices.Equal(before, saved) {
		t.Errorf("an earlier Ranking changed from %v to %v", saved, before)
	}
	if statuses[0].State != Unknown {
		t.Errorf("an earlier Statuses copy changed: %v", statuses[0].State)
	}
	if got := ranking(tr); got != "c b a" {
		t.Errorf("ranking %q, want %q", got, "c b a")
	}
	// Statuses returns a copy the caller may change.
	statuses = tr.Statuses()
	statuses[0].State = Healthy
	if tr.Status(0).State != TransportError {
		t.Error("modifying Statuses' result changed the tracker")
	}
}

func TestNewTrackerCopiesHosts(t *testing.T) {
	hosts := hostsOf("a=eu-1a", "b")
	tr := NewTracker(hosts, Options{Target: TargetReplica, Zone: "eu-1a"})
	hosts[0] = Host{Addr: "x", Zone: "eu-1b"}
	if s := tr.Status(0); s.Addr != "a" || s.Zone != "eu-1a" {
		t.Errorf("tracker saw a change to the caller's slice: %+v", s)
	}
}

func TestEmptyTracker(t *testing.T) {
	tr := NewTracker(nil, Options{})
	if tr.Len() != 0 || tr.Pick() != -1 || len(tr.Ranking()) != 0 || len(tr.Statuses()) != 0 {
		t.Errorf("empty tracker: Len %d Pick %d Ranking %v Statuses %v", tr.Len(), tr.Pick(), tr.Ranking(), tr.Statuses())
	}
}

func TestIndexOutOfRangePanics(t *testing.T) {
	tr := NewTracker(hostsOf("a", "b", "c"), Options{})
	calls := map[string]func(){
		"Status":                      func() { tr.Status(3) },
		"Role":                        func() { tr.Role(-1) },
		"ObserveConnect":              func() { tr.ObserveConnect(3, RolePrimary) },
		"ObserveZone":                 func() { tr.ObserveZone(3, "z") },
		"ObserveFailure":              func() { tr.ObserveFailure(3, Transport) },
		"ObserveFailure not-failover": func() { tr.ObserveFailure(3, NotFailover) },
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
	tr := NewTracker(hostsOf("a=eu-1a", "b=eu-1b", "c"), Options{Target: TargetReplica, Zone: "eu-1a"})
	apply(tr, []op{conn(0, RoleReplica), conn(1, RoleReplica), conn(2, RoleReplica)})
	tr2 := NewTracker(hostsOf("a", "b"), Options{})
	apply(tr2, []op{fail(0, Transport)})
	calls := map[string]func(){
		"Pick":                          func() { _ = tr.Pick() },
		"Ranking":                       func() { _ = tr.Ranking() },
		"Status":                        func() { _ = tr.Status(1) },
		"Role":                          func() { _ = tr.Role(1) },
		"Len":                           func() { _ = tr.Len() },
		"ObserveConnect unchanged":      func() { tr.ObserveConnect(0, RoleReplica) },
		"ObserveZone unchanged":         func() { tr.ObserveZone(1, "eu-1b") },
		"ObserveZone empty":             func() { tr.ObserveZone(1, "") },
		"ObserveFailure not-failover":   func() { tr.ObserveFailure(1, NotFailover) },
		"ObserveFailure same in outage": func() { tr2.ObserveFailure(0, Transport) },
	}
	for name, call := range calls {
		if n := testing.AllocsPerRun(100, call); n != 0 {
			t.Errorf("%s: %v allocs, want 0", name, n)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	const hosts, writers, readers, rounds = 8, 4, 4, 500
	specs := make([]string, hosts)
	for i := range specs {
		specs[i] = fmt.Sprintf("h%d=eu-1%c", i, 'a'+i%3)
	}
	tr := NewTracker(hostsOf(specs...), Options{Target: TargetPreferReplica, Zone: "eu-1a", Now: newFakeClock().Now})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range rounds {
				i := (n*7 + w) % hosts
				switch n % 5 {
				case 0:
					tr.ObserveConnect(i, RoleReplica)
				case 1:
					tr.ObserveConnect(i, RolePrimary)
				case 2:
					tr.ObserveFailure(i, Class(n%5))
				case 3:
					tr.ObserveZone(i, fmt.Sprintf("eu-1%c", 'a'+n%3))
				case 4:
					tr.ObserveFailure(i, Transport)
				}
			}
		}()
	}
	errs := make(chan string, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := make([]bool, hosts)
			for range rounds {
				p := tr.Pick()
				if p < 0 || p >= hosts {
					errs <- fmt.Sprintf("Pick %d out of range", p)
					return
				}
				clear(seen)
				for _, i := range tr.Ranking() {
					if seen[i] {
						errs <- fmt.Sprintf("Ranking repeats %d", i)
						return
					}
					seen[i] = true
				}
				_ = tr.Statuses()
				_ = tr.Status(p)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
