package patroni

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/topology"
)

// candidate returns a member as a Source reports it.
func candidate(host, role string, live bool) topology.Member {
	m := Member{Name: host, Host: host, Port: 5432, Role: ParseRole(role), RoleName: role, State: "streaming"}
	if !live {
		m.State = "stopped"
	}
	return m.Topology(DefaultZoneTag)
}

const local = "local:5432"

// fallbackMembers is a cluster seen from the local server's machine.
var fallbackMembers = []topology.Member{
	candidate("local", "leader", true),
	candidate("lead", "leader", true),
	candidate("rep1", "replica", true),
	candidate("sync1", "sync_standby", true),
	candidate("sl", "standby_leader", true),
	candidate("deadsync", "sync_standby", false),
	candidate("quorum", "quorum_standby", true),
	candidate("rep2", "replica", true),
}

func newTestFallback(t *testing.T, cfg FallbackConfig) *Fallback {
	t.Helper()
	cfg.Local = local
	f, err := NewFallback(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.rand = func(n int64) int64 { return n - 1 } // the longest cooldown: the base itself
	f.SetMembers(fallbackMembers)
	return f
}

// describePlan writes a plan as "[a b] [c d]", hosts only.
func describePlan(p Plan) string {
	var waves []string
	for _, w := range p.Waves {
		var hosts []string
		for _, m := range w {
			hosts = append(hosts, m.Host)
		}
		waves = append(waves, "["+strings.Join(hosts, " ")+"]")
	}
	return strings.Join(waves, " ")
}

func describeDecision(d Decision) string {
	s := d.Action.String()
	if d.Addr != "" {
		s += " " + d.Addr
	}
	if d.Lifetime > 0 {
		s += " " + d.Lifetime.String()
	}
	return s
}

func TestFallbackWaves(t *testing.T) {
	f := newTestFallback(t, FallbackConfig{})
	now := time.Unix(1e9, 0)
	// Wave 1: live synchronous standbys. Wave 2: the leader and replicas
	// in discovery order, then the standby leader, then the member with no
	// live role. The local server is never a candidate.
	want := "[sync1 quorum] [lead rep1 rep2 sl deadsync]"
	if got := describePlan(f.Plan(now)); got != want {
		t.Fatalf("plan %s, want %s", got, want)
	}
	f.SetMembers([]topology.Member{candidate("rep1", "replica", true), candidate("local", "replica", true)})
	if got := describePlan(f.Plan(now)); got != "[rep1]" {
		t.Fatalf("without synchronous standbys: %s", got)
	}
	f.SetMembers(nil)
	if got := f.Plan(now); len(got.Waves) != 0 {
		t.Fatalf("without members: %+v", got)
	}
}

// fallbackStep is one event or question in a scenario, at a time since
// the start.
type fallbackStep struct {
	at   time.Duration
	do   func(f *Fallback, now time.Time) string
	want string
}

func decide(f *Fallback, now time.Time) string { return describeDecision(f.Decide(now)) }
func plan(f *Fallback, now time.Time) string   { return describePlan(f.Plan(now)) }
func active(f *Fallback, now time.Time) string {
	addr, ok := f.Active(now)
	return fmt.Sprint(addr, " ", ok)
}
func localFailed(r Reason) func(*Fallback, time.Time) string {
	return func(f *Fallback, now time.Time) string { return fmt.Sprint(f.LocalFailed(now, r)) }
}
func candidateFailed(addr string, r Reason) func(*Fallback, time.Time) string {
	return func(f *Fallback, now time.Time) string { return fmt.Sprint(f.CandidateFailed(addr, now, r)) }
}
func won(addr string) func(*Fallback, time.Time) string {
	return func(f *Fallback, now time.Time) string { return "previous=" + f.Won(addr, now) }
}

func TestFallbackScenarios(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name  string
		steps []fallbackStep
	}{
		{"local server in use until it fails", []fallbackStep{
			{0, decide, "use-local " + local},
			{0, active, " false"},
		}},
		{"an authentication failure is no reason to fall back", []fallbackStep{
			{0, localFailed(ReasonAuth), "false"},
			{0, decide, "use-local " + local},
		}},
		{"wave 1 first, failed candidates skipped, winner cached", []fallbackStep{
			{0, localFailed(ReasonRefused), "true"},
			{0, decide, "discover"},
			{0, plan, "[sync1 quorum] [lead rep1 rep2 sl deadsync]"},
			{1 * s, candidateFailed("sync1:5432", ReasonTimeout), "false"},
			{1 * s, candidateFailed("quorum:5432", ReasonStartup), "false"},
			{1 * s, plan, "[lead rep1 rep2 sl deadsync]"},
			{2 * s, won("rep1:5432"), "previous="},
			{2 * s, decide, "use-fallback rep1:5432 30s"},
			{2 * s, active, "rep1:5432 true"},
			// The failed candidates come back after their 5s.
			{6 * s, plan, "[sync1 quorum] [lead rep1 rep2 sl deadsync]"},
			{29 * s, decide, "use-fallback rep1:5432 30s"},
			// After the local server's cooldown, it is tried again.
			{30 * s, decide, "use-local " + local},
			{30 * s, active, " false"},
		}},
		{"local fails again while the winner is cached", []fallbackStep{
			{0, localFailed(ReasonSocket), "true"},
			{5 * s, won("lead:5432"), "previous="},
			{30 * s, decide, "use-local " + local},
			{31 * s, localFailed(ReasonTimeout), "true"},
			{31 * s, decide, "use-fallback lead:5432 30s"},
			// The winner's cache ends 30s after it won.
			{35 * s, decide, "discover"},
		}},
		{"the winner fails: forgotten, one more round", []fallbackStep{
			{0, localFailed(ReasonRefused), "true"},
			{1 * s, won("sync1:5432"), "previous="},
			{3 * s, candidateFailed("sync1:5432", ReasonSocket), "true"},
			{3 * s, decide, "discover"},
			{3 * s, plan, "[quorum] [lead rep1 rep2 sl deadsync]"},
			{4 * s, won("quorum:5432"), "previous="},
			{4 * s, decide, "use-fallback quorum:5432 30s"},
		}},
		{"a new winner replaces the old in one step", []fallbackStep{
			{0, localFailed(ReasonRefused), "true"},
			{1 * s, won("rep1:5432"), "previous="},
			{2 * s, won("rep2:5432"), "previous=rep1:5432"},
			{2 * s, won("rep2:5432"), "previous="},
			{2 * s, active, "rep2:5432 true"},
		}},
		{"a candidate that is not the winner asks for no new round", []fallbackStep{
			{0, localFailed(ReasonRefused), "true"},
			{1 * s, won("rep1:5432"), "previous="},
			{2 * s, candidateFailed("rep2:5432", ReasonAuth), "false"},
			{2 * s, decide, "use-fallback rep1:5432 30s"},
		}},
		{"every candidate cooling: an empty plan", []fallbackStep{
			{0, localFailed(ReasonRefused), "true"},
			{0, func(f *Fallback, now time.Time) string {
				for _, m := range fallbackMembers {
					f.CandidateFailed(m.Addr(), now, ReasonRefused)
				}
				return plan(f, now)
			}, ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestFallback(t, FallbackConfig{})
			clk := clock.NewFake(time.Unix(1e9, 0))
			start := clk.Now()
			for i, st := range tt.steps {
				clk.Advance(start.Add(st.at).Sub(clk.Now()))
				if got := st.do(f, clk.Now()); got != st.want {
					t.Fatalf("step %d at %v: got %q, want %q", i, st.at, got, st.want)
				}
			}
		})
	}
}

func TestFallbackCooldownDoubling(t *testing.T) {
	f := newTestFallback(t, FallbackConfig{})
	const addr = "rep1:5432"
	now := time.Unix(1e9, 0)
	// Each failure comes the moment the previous cooldown ends; the last
	// comes after a quiet spell longer than the cap.
	tests := []struct {
		wait time.Duration // after the previous cooldown ended
		want time.Duration
	}{
		{0, 5 * time.Second},
		{0, 10 * time.Second},
		{0, 20 * time.Second},
		{0, 40 * time.Second},
		{0, 60 * time.Second},
		{0, 60 * time.Second},
		{60 * time.Second, 60 * time.Second}, // a quiet spell of exactly the cap keeps the streak
		{61 * time.Second, 5 * time.Second},  // a longer one ends it
		{0, 10 * time.Second},
	}
	for i, tt := range tests {
		now = now.Add(tt.wait)
		f.CandidateFailed(addr, now, ReasonTimeout)
		c := f.State(now).Cooling[addr]
		if got := c.Until.Sub(now); got != tt.want {
			t.Fatalf("failure %d: cooldown %v, want %v", i+1, got, tt.want)
		}
		if c.Reason != ReasonTimeout {
			t.Fatalf("reason %v", c.Reason)
		}
		// Skipped until the end of its cooldown, not a moment longer.
		if strings.Contains(describePlan(f.Plan(c.Until.Add(-time.Nanosecond))), "rep1") {
			t.Fatalf("failure %d: rep1 planned during its cooldown", i+1)
		}
		now = c.Until
		if !strings.Contains(describePlan(f.Plan(now)), "rep1") {
			t.Fatalf("failure %d: rep1 not planned after its cooldown", i+1)
		}
	}
	// Winning ends the streak.
	f.Won(addr, now)
	f.CandidateFailed(addr, now, ReasonSocket)
	if got := f.State(now).Cooling[addr]; got.Until.Sub(now) != 5*time.Second || got.Failures != 1 {
		t.Fatalf("after a win: %+v", got)
	}
}

// TestFallbackCooldownJitter: each cooldown is drawn between half of its
// base and all of it.
func TestFallbackCooldownJitter(t *testing.T) {
	for _, tt := range []struct {
		name string
		draw func(int64) int64
		want string
	}{
		{"the lowest draw", func(int64) int64 { return 0 }, "[2.5s 5s 10s 20s 30s 30s]"},
		{"the highest draw", func(n int64) int64 { return n - 1 }, "[5s 10s 20s 40s 1m0s 1m0s]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestFallback(t, FallbackConfig{})
			f.rand = tt.draw
			now := time.Unix(1e9, 0)
			var got []time.Duration
			for range 6 {
				f.CandidateFailed("x:1", now, ReasonRefused)
				until := f.State(now).Cooling["x:1"].Until
				got = append(got, until.Sub(now))
				now = until
			}
			if fmt.Sprint(got) != tt.want {
				t.Errorf("cooldowns %v, want %s", got, tt.want)
			}
		})
	}
	f := newTestFallback(t, FallbackConfig{})
	f.rand = rand.Int64N
	now := time.Unix(1e9, 0)
	for range 4 { // up to the cap: 5s, 10s, 20s, 40s
		f.CandidateFailed("x:1", now, ReasonRefused)
	}
	for range 100 {
		f.CandidateFailed("x:1", now, ReasonRefused)
		if d := f.State(now).Cooling["x:1"].Until.Sub(now); d < 30*time.Second || d > time.Minute {
			t.Fatalf("a capped cooldown of %v, outside [30s, 60s]", d)
		}
	}
}

func TestFallbackCooldownConfig(t *testing.T) {
	f := newTestFallback(t, FallbackConfig{CandidateCooldown: time.Second, CandidateCooldownMax: 3 * time.Second})
	now := time.Unix(1e9, 0)
	var got []time.Duration
	for range 4 {
		f.CandidateFailed("x:1", now, ReasonRefused)
		until := f.State(now).Cooling["x:1"].Until
		got = append(got, until.Sub(now))
		now = until
	}
	if fmt.Sprint(got) != "[1s 2s 3s 3s]" {
		t.Fatalf("cooldowns %v", got)
	}
}

func TestPlanTimeout(t *testing.T) {
	now := time.Unix(1e9, 0)
	tests := []struct {
		name  string
		cfg   FallbackConfig
		after time.Duration
		want  time.Duration
	}{
		{"defaults, at once", FallbackConfig{}, 0, 5 * time.Second},
		{"cut by the caller's deadline", FallbackConfig{}, 3 * time.Second, 2 * time.Second},
		{"past the deadline", FallbackConfig{}, 6 * time.Second, 0},
		{"connect timeout shorter", FallbackConfig{ConnectTimeout: time.Second}, 0, time.Second},
		{"wait shorter than connect", FallbackConfig{QueryWaitTimeout: 2 * time.Second}, 0, 2 * time.Second},
	}
	for _, tt := range tests {
		f := newTestFallback(t, tt.cfg)
		p := f.Plan(now)
		if got := p.Timeout(now.Add(tt.after)); got != tt.want {
			t.Errorf("%s: Timeout %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestFallbackState(t *testing.T) {
	f := newTestFallback(t, FallbackConfig{})
	now := time.Unix(1e9, 0)
	if s := f.State(now); s.LocalDown || s.Active != "" || len(s.Cooling) != 0 {
		t.Fatalf("initial state %+v", s)
	}
	f.LocalFailed(now, ReasonSocket)
	f.CandidateFailed("sync1:5432", now, ReasonStartup)
	f.Won("rep1:5432", now.Add(time.Second))
	s := f.State(now.Add(2 * time.Second))
	if !s.LocalDown || s.LocalReason != ReasonSocket || !s.LocalRetry.Equal(now.Add(30*time.Second)) ||
		s.Active != "rep1:5432" || !s.ActiveUntil.Equal(now.Add(31*time.Second)) ||
		len(s.Cooling) != 1 || s.Cooling["sync1:5432"].Reason != ReasonStartup {
		t.Fatalf("state %+v", s)
	}
	if s := f.State(now.Add(30 * time.Second)); s.LocalDown || s.Active != "" {
		t.Fatalf("after the cooldown %+v", s)
	}
}

func TestNewFallbackErrors(t *testing.T) {
	for _, cfg := range []FallbackConfig{
		{Cooldown: -1},
		{QueryWaitTimeout: -time.Second},
		{CandidateCooldown: time.Minute, CandidateCooldownMax: time.Second},
	} {
		if _, err := NewFallback(cfg); err == nil {
			t.Errorf("NewFallback(%+v) gave no error", cfg)
		}
	}
}

func TestFallbackEnums(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{ReasonRefused.String(), "refused"},
		{ReasonSocket.String(), "socket"},
		{ReasonTimeout.String(), "timeout"},
		{ReasonStartup.String(), "startup"},
		{ReasonAuth.String(), "auth"},
		{Reason(9).String(), "Reason(9)"},
		{UseLocal.String(), "use-local"},
		{UseFallback.String(), "use-fallback"},
		{Discover.String(), "discover"},
		{Action(9).String(), "Action(9)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	for r := ReasonRefused; r <= ReasonAuth; r++ {
		if r.FallsBack() != (r != ReasonAuth) {
			t.Errorf("%v.FallsBack() = %v", r, r.FallsBack())
		}
	}
}

// Callers on many goroutines share one Fallback.
func TestFallbackConcurrent(t *testing.T) {
	f := newTestFallback(t, FallbackConfig{})
	start := time.Unix(1e9, 0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				now := start.Add(time.Duration(i) * time.Second)
				switch d := f.Decide(now); d.Action {
				case UseLocal:
					f.LocalFailed(now, ReasonRefused)
				case Discover:
					for _, w := range f.Plan(now).Waves {
						if len(w) > 0 && (g+i)%3 == 0 {
							f.Won(w[0].Addr(), now)
						} else if len(w) > 0 {
							f.CandidateFailed(w[0].Addr(), now, ReasonTimeout)
						}
					}
				case UseFallback:
					if i%7 == 0 {
						f.CandidateFailed(d.Addr, now, ReasonSocket)
					}
				}
				f.SetMembers(fallbackMembers)
				_ = f.State(now)
			}
		})
	}
	wg.Wait()
}
