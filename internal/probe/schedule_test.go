package probe

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Draws at the two ends of the jitter, and the schedule the Pool would use
// with the defaults.
var (
	drawLow  = func(int64) int64 { return 0 }
	drawHigh = func(n int64) int64 { return n - 1 }
)

func defaultSchedule(rand func(int64) int64) Schedule {
	return Schedule{Idle: time.Second, WaitMax: 50 * time.Millisecond, Recheck: 50 * time.Millisecond, Rand: rand} // the Pool's defaults
}

const ms = time.Millisecond

// TestProbeScheduleNext: (state, wait, claim) → the delay to the next
// probe, at both ends of the jitter.
func TestProbeScheduleNext(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	waitFor := func(d time.Duration) Wait { return Wait{Waiting: true, Since: t0.Add(-d)} }
	answered := State{Found: Answered, Last: t0}
	tests := []struct {
		name     string
		st       State
		w        Wait
		claimed  bool
		low, max time.Duration // the delay from t0 with the lowest and the highest draw
	}{
		{"no one waits", answered, Wait{}, false, time.Second, time.Second},
		{"no one waits, claimed primary", answered, Wait{}, true, time.Second, time.Second},
		{"no one waits, dormant", State{Found: Answered, Last: t0, Dormant: true}, Wait{}, false, 10 * time.Second, 10 * time.Second},
		{"dormant, calls wait: the wait's curve", State{Found: Answered, Last: t0, Dormant: true}, waitFor(100 * ms), false, 5 * ms, 10 * ms},
		{"wait starts", answered, waitFor(0), false, 2 * ms, 2 * ms},
		{"waited 10ms: the floor", answered, waitFor(10 * ms), false, 2 * ms, 2 * ms},
		{"waited 30ms", answered, waitFor(30 * ms), false, 2 * ms, 3 * ms},
		{"waited 100ms", answered, waitFor(100 * ms), false, 5 * ms, 10 * ms},
		{"waited 300ms", answered, waitFor(300 * ms), false, 15 * ms, 30 * ms},
		{"waited 500ms: the cap", answered, waitFor(500 * ms), false, 25 * ms, 50 * ms},
		{"waited 3s: the cap", answered, waitFor(3 * time.Second), false, 25 * ms, 50 * ms},
		{"waited 3s, claimed primary before the wait: the cap", answered, waitFor(3 * time.Second), true, 25 * ms, 50 * ms},
		{"waited 3s, hinted primary 10ms ago: the floor", hintedAgo(answered, 10*ms), waitFor(3 * time.Second), true, 2 * ms, 2 * ms},
		{"waited 3s, hinted primary 100ms ago: its curve from the hint", hintedAgo(answered, 100*ms), waitFor(3 * time.Second), true, 5 * ms, 10 * ms},
		{"waited 3s, hinted 10ms ago, the claim withdrawn: the cap", hintedAgo(answered, 10*ms), waitFor(3 * time.Second), false, 25 * ms, 50 * ms},
		{"waited 100ms, hinted before the wait: the wait's curve", hintedAgo(answered, time.Second), waitFor(100 * ms), true, 5 * ms, 10 * ms},
		{"no one waits, hinted 100ms ago: the time since the hint", hintedAgo(answered, 100*ms), Wait{}, true, 50 * ms, 100 * ms},
		{"no one waits, hinted 1s ago: idle again", hintedAgo(answered, time.Second), Wait{}, true, time.Second, time.Second},
		{"no one waits, hinted 100ms ago, the claim withdrawn: idle", hintedAgo(answered, 100*ms), Wait{}, false, time.Second, time.Second},
		{"failed, no one waits, hinted 100ms ago: its backoff", hintedAgo(State{Found: Failed, Failures: 2, Last: t0, RetryAt: t0.Add(7 * ms)}, 100*ms), Wait{}, true, 7 * ms, 7 * ms},
		{"hint pending: at once", State{Found: Answered, Last: t0.Add(-ms), HintPending: true}, Wait{}, true, 0, 0},
		{"hint pending, calls wait: at once", State{Found: Answered, Last: t0.Add(-ms), HintPending: true}, waitFor(time.Second), true, 0, 0},
		{"failed, no one waits", State{Found: Failed, Failures: 1, Last: t0, RetryAt: t0.Add(5 * ms)}, Wait{}, false, time.Second, time.Second},
		{"failed, calls wait: its backoff", State{Found: Failed, Failures: 3, Last: t0, RetryAt: t0.Add(17 * ms)}, waitFor(time.Second), false, 17 * ms, 17 * ms},
		{"failed, claimed primary: still its backoff", State{Found: Failed, Failures: 3, Last: t0, RetryAt: t0.Add(17 * ms)}, waitFor(time.Second), true, 17 * ms, 17 * ms},
		{"failed, hint pending: at once", State{Found: Failed, Failures: 3, Last: t0, RetryAt: t0.Add(17 * ms), HintPending: true}, waitFor(time.Second), true, 0, 0},
		{"credentials refused, calls wait: never fast", State{Found: Refused, Last: t0}, waitFor(0), false, time.Second, time.Second},
		{"credentials refused, claimed primary", State{Found: Refused, Last: t0}, waitFor(0), true, time.Second, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, d := range []struct {
				rand func(int64) int64
				want time.Duration
			}{{drawLow, tt.low}, {drawHigh, tt.max}} {
				if got := defaultSchedule(d.rand).Next(tt.st, tt.w, tt.claimed, t0).Sub(t0); got != d.want {
					t.Errorf("next = t0+%v, want t0+%v", got, d.want)
				}
			}
		})
	}
}

// TestProbeScheduleObserve: (state, outcome) → the new state, and the
// backoff of a host that cannot be reached, doubling from 5ms to 500ms.
func TestProbeScheduleObserve(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	failed := func(n int) State {
		return State{Found: Failed, Failures: n, Last: t0.Add(-time.Second)}
	}
	tests := []struct {
		name         string
		st           State
		o            Finding
		failures     int
		backoff      [2]time.Duration // retryAt − t0 with the lowest and the highest draw; 0 when none
		outcomeAfter Finding
	}{
		{"first failure", State{}, Failed, 1, [2]time.Duration{2500 * time.Microsecond, 5 * ms}, Failed},
		{"second failure", failed(1), Failed, 2, [2]time.Duration{5 * ms, 10 * ms}, Failed},
		{"seventh failure", failed(6), Failed, 7, [2]time.Duration{160 * ms, 320 * ms}, Failed},
		{"eighth failure: the cap", failed(7), Failed, 8, [2]time.Duration{250 * ms, 500 * ms}, Failed},
		{"thousandth failure", failed(999), Failed, 1000, [2]time.Duration{250 * ms, 500 * ms}, Failed},
		{"answer after failures", failed(9), Answered, 0, [2]time.Duration{}, Answered},
		{"refusal after failures", failed(9), Refused, 0, [2]time.Duration{}, Refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, rand := range []func(int64) int64{drawLow, drawHigh} {
				st := defaultSchedule(rand).Observe(tt.st, tt.o, Wait{}, t0)
				if st.Found != tt.outcomeAfter || st.Failures != tt.failures || !st.Last.Equal(t0) {
					t.Errorf("observe = %+v, want outcome %v, %d failures, last t0", st, tt.outcomeAfter, tt.failures)
				}
				got := time.Duration(0)
				if !st.RetryAt.IsZero() {
					got = st.RetryAt.Sub(t0)
				}
				if got != tt.backoff[i] {
					t.Errorf("backoff = %v, want %v", got, tt.backoff[i])
				}
			}
		})
	}
}

// A short health_probe_interval bounds both the backoff and the interval
// while calls wait.
func TestProbeScheduleShortIdleInterval(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := Schedule{Idle: 20 * ms, WaitMax: 50 * ms, Rand: drawHigh}
	st := s.Observe(failedState(20), Failed, Wait{}, t0)
	if got := st.RetryAt.Sub(t0); got != 20*ms {
		t.Errorf("backoff = %v, want health_probe_interval (20ms)", got)
	}
	w := Wait{Waiting: true, Since: t0.Add(-time.Minute)}
	if got := s.Next(State{Last: t0}, w, false, t0).Sub(t0); got != 20*ms {
		t.Errorf("interval while waiting = %v, want health_probe_interval (20ms)", got)
	}
}

func failedState(n int) State { return State{Found: Failed, Failures: n} }

// hintedAgo returns st with a hint that came ago before its last probe
// (which the hint made at once).
func hintedAgo(st State, ago time.Duration) State {
	st.HintAt = st.Last.Add(-ago)
	return st
}

// TestProbeScheduleWoken: the first waiter wakes a probe at once, unless
// its host is inside its own backoff.
func TestProbeScheduleWoken(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := defaultSchedule(drawHigh)
	tests := []struct {
		name string
		st   State
		want time.Duration
	}{
		{"answered", State{Found: Answered, Last: t0.Add(-time.Second)}, 0},
		{"credentials refused", State{Found: Refused, Last: t0.Add(-time.Second)}, 0},
		{"failed, backoff over", State{Found: Failed, Failures: 8, RetryAt: t0.Add(-ms)}, 0},
		{"failed, backoff ends at once", State{Found: Failed, Failures: 8, RetryAt: t0}, 0},
		{"failed, inside its backoff", State{Found: Failed, Failures: 8, RetryAt: t0.Add(300 * ms)}, 300 * ms},
		{"busy, inside its backoff", State{Found: Busy, Failures: 3, RetryAt: t0.Add(20 * ms)}, 20 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Woken(tt.st, t0).Sub(t0); got != tt.want {
				t.Errorf("woken = t0+%v, want t0+%v", got, tt.want)
			}
		})
	}
}

func TestFindingOf(t *testing.T) {
	tests := []struct {
		err  error
		want Finding
	}{
		{nil, Answered},
		{syscall.ECONNREFUSED, Failed},
		{errors.New("unexpected EOF"), Failed},
		{&pgconn.PgError{Code: "57P03"}, Busy},
		{&pgconn.PgError{Code: "53300"}, Busy},
		{&pgconn.PgError{Code: "28P01"}, Refused},
		{&pgconn.PgError{Code: "3D000"}, Refused},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.err), func(t *testing.T) {
			if got := FindingOf(tt.err); got != tt.want {
				t.Errorf("FindingOf(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestProbeScheduleRates: what the defaults cost. Over an outage of T with
// calls waiting throughout, a reachable host is probed about
// ∫ dt / interval(t) times and a dead one dialled as its backoff allows; the
// numbers in docs/how-failover-works.md come from here. The draws are spread evenly over the
// jitter.
func TestProbeScheduleRates(t *testing.T) {
	var k int64
	even := func(n int64) int64 { k++; return (k * 7919) % n }
	s := defaultSchedule(even)
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w := Wait{Waiting: true, Since: t0}
	for _, outage := range []time.Duration{100 * ms, time.Second, 3 * time.Second, 10 * time.Second, 30 * time.Second} {
		reachable, dead := 0, 0
		for st, now := (State{Last: t0}), t0; ; reachable++ {
			now = s.Next(st, w, false, now)
			if now.Sub(t0) > outage {
				break
			}
			st = s.Observe(st, Answered, w, now)
		}
		for st, now := s.Observe(State{}, Failed, w, t0), t0; ; dead++ {
			now = s.Next(st, w, false, now)
			if now.Sub(t0) > outage {
				break
			}
			st = s.Observe(st, Failed, w, now)
		}
		t.Logf("outage %v: %d probes of a reachable host (%.0f/s), %d dials of a dead one (%.1f/s)",
			outage, reachable, float64(reachable)/outage.Seconds(), dead, float64(dead)/outage.Seconds())
		if perSecond := float64(dead) / max(outage.Seconds(), 1); perSecond > 20 {
			t.Errorf("a dead host is dialled %.1f times a second over %v", perSecond, outage)
		}
	}
}

// TestProbeScheduleHinted: a hint forgets the host's backoff and makes its
// next probe due at once, waiting or not; that probe's outcome decides
// what follows, and a host that still cannot be reached starts its backoff
// again from the first step. On a fake clock: a dead leader backed off to
// 500ms, then named the new primary again.
func TestProbeScheduleHinted(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := defaultSchedule(drawHigh)
	noWait := Wait{}
	waiting := Wait{Waiting: true, Since: t0}

	// Twenty failures in a row: the backoff is at its cap.
	st, now := State{}, t0
	for range 20 {
		st = s.Observe(st, Failed, Wait{}, now)
		now = s.Next(st, waiting, false, now)
	}
	if got := st.RetryAt.Sub(st.Last); got != backoffMax {
		t.Fatalf("backoff after 20 failures = %v, want %v", got, backoffMax)
	}

	// The hint comes 1ms after the last failed probe, deep inside the
	// backoff: the host is due at once, whether calls wait or not, and a
	// first waiter's wake-up does not hold it back either.
	at := st.Last.Add(ms)
	h := s.Hinted(st, at)
	if h.Failures != 0 || !h.RetryAt.IsZero() || !h.HintPending || !h.HintAt.Equal(at) {
		t.Fatalf("hinted = %+v, want no failures, no backoff, a pending hint at the hint's time", h)
	}
	for _, w := range []Wait{noWait, waiting} {
		if got := s.Next(h, w, true, at); !got.Equal(at) {
			t.Errorf("next after a hint (%+v) = hint+%v, want at once", w, got.Sub(at))
		}
	}
	if got := s.Woken(h, at); !got.Equal(at) {
		t.Errorf("woken after a hint = hint+%v, want at once", got.Sub(at))
	}

	// That probe fails too: the backoff starts again from its first step.
	probed := at.Add(3 * ms)
	f := s.Observe(h, Failed, Wait{}, probed)
	if f.HintPending || f.Failures != 1 {
		t.Errorf("after the hinted probe failed: %+v, want the hint spent and one failure", f)
	}
	if got := s.Next(f, waiting, true, probed).Sub(probed); got != backoffInitial {
		t.Errorf("backoff after the hinted probe failed = %v, want %v", got, backoffInitial)
	}

	// It answers instead (still in recovery, say): while calls wait and the
	// claim stands, the host is probed on the curve counted from the hint,
	// not from the wait's start a second earlier; when no call waits, idle.
	a := s.Observe(h, Answered, Wait{}, probed)
	if a.HintPending {
		t.Errorf("after the hinted probe answered: %+v, want the hint spent", a)
	}
	if got := s.Next(a, waiting, true, probed).Sub(probed); got != Floor {
		t.Errorf("next while waiting, 3ms after the hint = +%v, want the floor %v", got, Floor)
	}
	if got := s.Next(a, noWait, true, probed).Sub(probed); got != backoffInitial {
		t.Errorf("next with no call waiting, 3ms after the hint = +%v, want %v", got, backoffInitial)
	}

	// With no call waiting, each interval is as long as the time since the
	// hint, until that reaches health_probe_interval: then the host is
	// back on its idle schedule. About nine probes in all.
	n, last := 0, a
	for now := probed; ; n++ {
		now = s.Next(last, noWait, true, now)
		if now.Sub(last.Last) >= s.Idle {
			break
		}
		last = s.Observe(last, Answered, Wait{}, now)
	}
	t.Logf("the follow-up of a hint with no call waiting: %d probes over %v", n, last.Last.Sub(at))
	if got := last.Last.Sub(at); n < 5 || n > 12 || got > 2*s.Idle {
		t.Errorf("the follow-up of a hint took %d probes over %v, want about 9 within 2s", n, got)
	}
	// A claim withdrawn ends it at once.
	if got := s.Next(a, noWait, false, probed).Sub(probed); got != s.Idle {
		t.Errorf("next after the claim was withdrawn = +%v, want health_probe_interval %v", got, s.Idle)
	}

	// A refusing server named the primary is asked at once as well.
	r := s.Hinted(s.Observe(State{}, Refused, Wait{}, t0), at)
	if got := s.Next(r, waiting, true, at); !got.Equal(at) {
		t.Errorf("next for a refusing server after a hint = hint+%v, want at once", got.Sub(at))
	}
}

// TestProbeScheduleWatch: a replica that a promotion would make usable is
// watched while calls wait, checking twice per interval of the polling
// curve for about watchSpan, and the next watch follows the last at once
// unless it came back within one step.
func TestProbeScheduleWatch(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := defaultSchedule(drawHigh)
	waitFor := func(d time.Duration) Wait { return Wait{Waiting: true, Since: t0.Add(-d)} }
	answered := State{Found: Answered, Last: t0}
	tests := []struct {
		name       string
		st         State
		w          Wait
		claimed    bool
		promotable bool
		want       Watch
	}{
		{"no one waits", answered, Wait{}, false, true, Watch{}},
		{"not promotable", answered, waitFor(time.Second), false, false, Watch{}},
		{"its last probe failed", State{Found: Failed, Last: t0}, waitFor(time.Second), false, true, Watch{}},
		{"credentials refused", State{Found: Refused, Last: t0}, waitFor(time.Second), false, true, Watch{}},
		{"wait starts: the floor", answered, waitFor(0), false, true, Watch{Step: 2 * ms, Checks: 100}},
		{"waited 100ms: half of 10ms", answered, waitFor(100 * ms), false, true, Watch{Step: 5 * ms, Checks: 40}},
		{"waited 3s: half of the cap", answered, waitFor(3 * time.Second), false, true, Watch{Step: 25 * ms, Checks: 8}},
		{"waited 3s, named the primary 100ms ago: its curve from the hint", hintedAgo(answered, 100*ms), waitFor(3 * time.Second), true, true, Watch{Step: 5 * ms, Checks: 40}},
		{"waited 3s, named 100ms ago, the claim withdrawn: the cap", hintedAgo(answered, 100*ms), waitFor(3 * time.Second), false, true, Watch{Step: 25 * ms, Checks: 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Watch(tt.st, tt.w, tt.claimed, tt.promotable, t0); got != tt.want {
				t.Errorf("watch = %+v, want %+v", got, tt.want)
			}
		})
	}

	plan := Watch{Step: 25 * ms, Checks: 8}
	if got := plan.Length(); got != 200*ms {
		t.Errorf("length of %+v = %v, want 200ms", plan, got)
	}
	full := State{Found: Answered, Began: t0, Last: t0.Add(200 * ms)}
	if got := s.AfterWatch(full, plan); got.After(full.Last) {
		t.Errorf("after a watch that ran its length: %v after it answered, want at once", got.Sub(full.Last))
	}
	early := State{Found: Answered, Began: t0, Last: t0.Add(ms)}
	if got := s.AfterWatch(early, plan).Sub(t0); got != plan.Step {
		t.Errorf("after a watch that answered within a Step: %v after it was sent, want one step, %v", got, plan.Step)
	}
}

// TestProbeScheduleRecheck: a Lagging host (its name leads to a standby
// that streams from a primary elsewhere) is reached through a fresh
// connection every recheckInterval of the wait's age while calls wait,
// and its watch ends when the next one is due; a dead host's backoff is
// capped while calls wait, a busy server's is not.
func TestProbeScheduleRecheck(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	waitFor := func(d time.Duration) Wait { return Wait{Waiting: true, Since: t0.Add(-d)} }
	for _, tc := range []struct {
		name     string
		w        Wait
		low, max time.Duration // FreshAt − t0 at both ends of the jitter
	}{
		{"wait starts: the floor", waitFor(0), 25 * ms, 50 * ms},
		{"waited 4s", waitFor(4 * time.Second), 40 * ms, 80 * ms},
		{"waited 20s", waitFor(20 * time.Second), 200 * ms, 400 * ms},
		{"waited 5min: idle", waitFor(5 * time.Minute), 500 * ms, time.Second},
		{"no one waits: idle", Wait{}, 500 * ms, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, rand := range []func(int64) int64{drawLow, drawHigh} {
				st := defaultSchedule(rand).Observe(State{}, Lagging, tc.w, t0)
				if got, want := st.FreshAt.Sub(t0), []time.Duration{tc.low, tc.max}[i]; got != want {
					t.Errorf("fresh connection due at t0+%v, want t0+%v", got, want)
				}
			}
		})
	}

	s := defaultSchedule(drawHigh)
	w := waitFor(4 * time.Second)
	st := s.Observe(State{}, Lagging, w, t0) // due at t0+80ms
	if s.Fresh(st, w, t0.Add(79*ms)) {
		t.Error("fresh connection before it is due")
	}
	if !s.Fresh(st, w, t0.Add(80*ms)) {
		t.Error("no fresh connection when it is due")
	}
	if s.Fresh(st, Wait{}, t0.Add(80*ms)) {
		t.Error("fresh connection while no call waits")
	}
	if s.Fresh(s.Observe(State{}, Answered, w, t0), w, t0.Add(time.Second)) {
		t.Error("fresh connection of a host that answered in a role the Pool takes")
	}
	// A later answer keeps the time drawn; another outcome drops it.
	if again := s.Observe(st, Lagging, w, t0.Add(30*ms)); !again.FreshAt.Equal(st.FreshAt) {
		t.Errorf("a second answer moved the fresh connection from %v to %v", st.FreshAt, again.FreshAt)
	}
	if failed := s.Observe(st, Failed, w, t0); !failed.FreshAt.IsZero() {
		t.Error("a failure kept the fresh connection's time")
	}
	// name_recheck_interval=0: no fresh connection, and a whole watch.
	off := s
	off.Recheck = 0
	if st := off.Observe(State{}, Lagging, w, t0); off.Fresh(st, w, t0.Add(time.Hour)) {
		t.Error("a fresh connection with Recheck 0")
	}
	if plan := off.Watch(State{Found: Lagging}, w, false, true, t0); plan.Length() < watchSpan-plan.Step {
		t.Errorf("watch of a lagging host with Recheck 0 = %v, want about %v", plan.Length(), watchSpan)
	}
	// Polled on the wait's curve, but never later than the fresh connection.
	if got := s.Next(State{Found: Lagging, Last: t0, FreshAt: t0.Add(10 * ms)}, w, false, t0).Sub(t0); got != 10*ms {
		t.Errorf("next = t0+%v, want the fresh connection at t0+10ms", got)
	}
	// The watch lasts one follow interval, not watchSpan.
	if plan := s.Watch(st, w, false, true, t0); plan.Length() > 80*ms || plan.Checks < 1 {
		t.Errorf("watch of a lagging host = %+v (%v), want at most 80ms", plan, plan.Length())
	}
	if plan := s.Watch(State{Found: Answered}, w, false, true, t0); plan.Length() < watchSpan-plan.Step {
		t.Errorf("watch of a standby = %v, want about %v", plan.Length(), watchSpan)
	}

	// Backoffs after many failures, at the high end of the jitter.
	for _, tc := range []struct {
		name string
		o    Finding
		w    Wait
		want time.Duration
	}{
		{"dead host, no one waits", Failed, Wait{}, backoffMax},
		{"dead host, calls wait", Failed, w, waitBackoffMax},
		{"busy server, calls wait", Busy, w, backoffMax},
	} {
		st := s.Observe(State{Found: tc.o, Failures: 20}, tc.o, tc.w, t0)
		if got := st.RetryAt.Sub(t0); got != tc.want {
			t.Errorf("%s: backoff %v, want %v", tc.name, got, tc.want)
		}
	}
}
