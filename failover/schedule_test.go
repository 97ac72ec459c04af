package failover

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

func defaultSchedule(rand func(int64) int64) probeSchedule {
	return probeSchedule{idle: defaultHealthProbeInterval, waitMax: defaultHealthProbeWaitMax, rand: rand}
}

const ms = time.Millisecond

// TestProbeScheduleNext: (state, wait, claim) → the delay to the next
// probe, at both ends of the jitter.
func TestProbeScheduleNext(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	waitFor := func(d time.Duration) waitState { return waitState{waiting: true, since: t0.Add(-d)} }
	answered := probeState{outcome: probeAnswered, last: t0}
	tests := []struct {
		name     string
		st       probeState
		w        waitState
		claimed  bool
		low, max time.Duration // the delay from t0 with the lowest and the highest draw
	}{
		{"no one waits", answered, waitState{}, false, time.Second, time.Second},
		{"no one waits, claimed primary", answered, waitState{}, true, time.Second, time.Second},
		{"wait starts", answered, waitFor(0), false, 2 * ms, 2 * ms},
		{"waited 10ms: the floor", answered, waitFor(10 * ms), false, 2 * ms, 2 * ms},
		{"waited 30ms", answered, waitFor(30 * ms), false, 2 * ms, 3 * ms},
		{"waited 100ms", answered, waitFor(100 * ms), false, 5 * ms, 10 * ms},
		{"waited 300ms", answered, waitFor(300 * ms), false, 15 * ms, 30 * ms},
		{"waited 500ms: the cap", answered, waitFor(500 * ms), false, 25 * ms, 50 * ms},
		{"waited 3s: the cap", answered, waitFor(3 * time.Second), false, 25 * ms, 50 * ms},
		{"waited 3s, claimed primary: the floor", answered, waitFor(3 * time.Second), true, 2 * ms, 2 * ms},
		{"failed, no one waits", probeState{outcome: probeFailed, failures: 1, last: t0, retryAt: t0.Add(5 * ms)}, waitState{}, false, time.Second, time.Second},
		{"failed, calls wait: its backoff", probeState{outcome: probeFailed, failures: 3, last: t0, retryAt: t0.Add(17 * ms)}, waitFor(time.Second), false, 17 * ms, 17 * ms},
		{"failed, claimed primary: still its backoff", probeState{outcome: probeFailed, failures: 3, last: t0, retryAt: t0.Add(17 * ms)}, waitFor(time.Second), true, 17 * ms, 17 * ms},
		{"credentials refused, calls wait: never fast", probeState{outcome: probeRefused, last: t0}, waitFor(0), false, time.Second, time.Second},
		{"credentials refused, claimed primary", probeState{outcome: probeRefused, last: t0}, waitFor(0), true, time.Second, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, d := range []struct {
				rand func(int64) int64
				want time.Duration
			}{{drawLow, tt.low}, {drawHigh, tt.max}} {
				if got := defaultSchedule(d.rand).next(tt.st, tt.w, tt.claimed, t0).Sub(t0); got != d.want {
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
	failed := func(n int) probeState {
		return probeState{outcome: probeFailed, failures: n, last: t0.Add(-time.Second)}
	}
	tests := []struct {
		name         string
		st           probeState
		o            probeOutcome
		failures     int
		backoff      [2]time.Duration // retryAt − t0 with the lowest and the highest draw; 0 when none
		outcomeAfter probeOutcome
	}{
		{"first failure", probeState{}, probeFailed, 1, [2]time.Duration{2500 * time.Microsecond, 5 * ms}, probeFailed},
		{"second failure", failed(1), probeFailed, 2, [2]time.Duration{5 * ms, 10 * ms}, probeFailed},
		{"seventh failure", failed(6), probeFailed, 7, [2]time.Duration{160 * ms, 320 * ms}, probeFailed},
		{"eighth failure: the cap", failed(7), probeFailed, 8, [2]time.Duration{250 * ms, 500 * ms}, probeFailed},
		{"thousandth failure", failed(999), probeFailed, 1000, [2]time.Duration{250 * ms, 500 * ms}, probeFailed},
		{"answer after failures", failed(9), probeAnswered, 0, [2]time.Duration{}, probeAnswered},
		{"refusal after failures", failed(9), probeRefused, 0, [2]time.Duration{}, probeRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, rand := range []func(int64) int64{drawLow, drawHigh} {
				st := defaultSchedule(rand).observe(tt.st, tt.o, t0)
				if st.outcome != tt.outcomeAfter || st.failures != tt.failures || !st.last.Equal(t0) {
					t.Errorf("observe = %+v, want outcome %v, %d failures, last t0", st, tt.outcomeAfter, tt.failures)
				}
				got := time.Duration(0)
				if !st.retryAt.IsZero() {
					got = st.retryAt.Sub(t0)
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
	s := probeSchedule{idle: 20 * ms, waitMax: 50 * ms, rand: drawHigh}
	st := s.observe(failedState(20), probeFailed, t0)
	if got := st.retryAt.Sub(t0); got != 20*ms {
		t.Errorf("backoff = %v, want health_probe_interval (20ms)", got)
	}
	w := waitState{waiting: true, since: t0.Add(-time.Minute)}
	if got := s.next(probeState{last: t0}, w, false, t0).Sub(t0); got != 20*ms {
		t.Errorf("interval while waiting = %v, want health_probe_interval (20ms)", got)
	}
}

func failedState(n int) probeState { return probeState{outcome: probeFailed, failures: n} }

// TestProbeScheduleWoken: the first waiter wakes a probe at once, unless
// its host is inside its own backoff.
func TestProbeScheduleWoken(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := defaultSchedule(drawHigh)
	tests := []struct {
		name string
		st   probeState
		want time.Duration
	}{
		{"answered", probeState{outcome: probeAnswered, last: t0.Add(-time.Second)}, 0},
		{"credentials refused", probeState{outcome: probeRefused, last: t0.Add(-time.Second)}, 0},
		{"failed, backoff over", probeState{outcome: probeFailed, failures: 8, retryAt: t0.Add(-ms)}, 0},
		{"failed, backoff ends at once", probeState{outcome: probeFailed, failures: 8, retryAt: t0}, 0},
		{"failed, inside its backoff", probeState{outcome: probeFailed, failures: 8, retryAt: t0.Add(300 * ms)}, 300 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.woken(tt.st, t0).Sub(t0); got != tt.want {
				t.Errorf("woken = t0+%v, want t0+%v", got, tt.want)
			}
		})
	}
}

func TestProbeOutcomeOf(t *testing.T) {
	tests := []struct {
		err  error
		want probeOutcome
	}{
		{nil, probeAnswered},
		{syscall.ECONNREFUSED, probeFailed},
		{errors.New("unexpected EOF"), probeFailed},
		{&pgconn.PgError{Code: "57P03"}, probeFailed},
		{&pgconn.PgError{Code: "28P01"}, probeRefused},
		{&pgconn.PgError{Code: "3D000"}, probeRefused},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.err), func(t *testing.T) {
			if got := outcomeOf(tt.err); got != tt.want {
				t.Errorf("outcomeOf(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestProbeScheduleRates: what the defaults cost. Over an outage of T with
// calls waiting throughout, a reachable host is probed about
// ∫ dt / interval(t) times and a dead one dialled as its backoff allows; the
// README's numbers come from here. The draws are spread evenly over the
// jitter.
func TestProbeScheduleRates(t *testing.T) {
	var k int64
	even := func(n int64) int64 { k++; return (k * 7919) % n }
	s := defaultSchedule(even)
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w := waitState{waiting: true, since: t0}
	for _, outage := range []time.Duration{100 * ms, time.Second, 3 * time.Second, 10 * time.Second, 30 * time.Second} {
		reachable, dead := 0, 0
		for st, now := (probeState{last: t0}), t0; ; reachable++ {
			now = s.next(st, w, false, now)
			if now.Sub(t0) > outage {
				break
			}
			st = s.observe(st, probeAnswered, now)
		}
		for st, now := s.observe(probeState{}, probeFailed, t0), t0; ; dead++ {
			now = s.next(st, w, false, now)
			if now.Sub(t0) > outage {
				break
			}
			st = s.observe(st, probeFailed, now)
		}
		t.Logf("outage %v: %d probes of a reachable host (%.0f/s), %d dials of a dead one (%.1f/s)",
			outage, reachable, float64(reachable)/outage.Seconds(), dead, float64(dead)/outage.Seconds())
		if perSecond := float64(dead) / max(outage.Seconds(), 1); perSecond > 10 {
			t.Errorf("a dead host is dialled %.1f times a second over %v", perSecond, outage)
		}
	}
}
