package failover

import (
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/backoff"
)

// probeSchedule says when a host's probe loop probes next. It only
// computes: the loop passes in the Pool's clock readings and what the
// last probe found, and the jitter is drawn from rand.
//
// Every probe wakes a server process, and every instance of an application
// probes every host, so the schedule is a cost budget as much as a latency
// one:
//
//   - no call waits: every idle (health_probe_interval);
//   - calls wait, the host answered its last probe: the wait's age divided
//     by probeGrowth, at least probeFloor and at most waitMax
//     (health_probe_wait_max), jittered into [½, 1] of that (never below
//     probeFloor), so that instances woken by the same crash do not probe
//     in step;
//   - calls wait for a primary and the host is a replica that a promotion
//     would make usable: the probe watches instead (see watch). It waits
//     on the server, which checks twice per interval of the curve above
//     whether it is still read-only and answers as soon as it is not; the
//     next watch starts as soon as the last one has answered;
//   - a topology source names the host the new primary (a hint, see
//     hinted): the host goes to the front. Its backoff is forgotten and it
//     is probed at once, waiting or not. A source names a leader before its
//     server has finished promoting, so for one idle after the hint, while
//     the claim stands, the host is followed up: while calls wait, on the
//     curve above counted from the hint instead of from the wait's start
//     (2ms apart at first); while none waits, each interval as long as the
//     time since the hint (from probeBackoffInitial: about 9 probes with
//     the defaults); a host that cannot be reached keeps its backoff,
//     started again from the first step. Its server's answer still decides
//     its role;
//   - the host could not be reached (refused, timed out, reset, refusing
//     for now): a backoff of its own on the module's one curve
//     (backoff.Exponential), probeBackoffInitial doubling with each
//     failure up to probeBackoffMax (and never beyond idle), each step
//     jittered into [½, 1] (backoff.DrawEqual);
//   - the server refused the credentials or the database: every idle,
//     waiting or not; faster would only fill the server's log.
//
// The first call to wait wakes every probe at once (see woken): that is
// what makes a promotion that happened before the wait seen at once. A
// host inside its backoff is still not dialled before the backoff ends.
type probeSchedule struct {
	idle    time.Duration // health_probe_interval
	waitMax time.Duration // health_probe_wait_max
	rand    backoff.Rand  // uniform in [0, n), n > 0
}

const (
	// probeFloor is the shortest interval between two probes of a host.
	probeFloor = 2 * time.Millisecond
	// probeGrowth is the ratio of the time calls have waited to the
	// interval between probes of a reachable host: after 100 ms of waiting
	// a host is probed about every 10 ms (jitter aside).
	probeGrowth = 10
	// probeBackoffInitial and probeBackoffMax bound the backoff of a host
	// that cannot be reached: a dead host is dialled about 8 times in the
	// first second and then 2-4 times a second.
	probeBackoffInitial = 5 * time.Millisecond
	probeBackoffMax     = 500 * time.Millisecond
)

// probeOutcome is what a host's last probe came to, as the schedule sees
// it.
type probeOutcome int

const (
	// probeAnswered: the server answered (or the host was not probed yet).
	probeAnswered probeOutcome = iota
	// probeFailed: the host could not be reached, the connection broke,
	// or the server refused for now (starting up, too many clients).
	probeFailed
	// probeRefused: the server refused the credentials or the database.
	probeRefused
)

// String returns the outcome's name.
func (o probeOutcome) String() string {
	switch o {
	case probeAnswered:
		return "answered"
	case probeFailed:
		return "failed"
	case probeRefused:
		return "refused"
	}
	return "probeOutcome(?)"
}

// outcomeOf sorts a probe's error into a probeOutcome.
func outcomeOf(err error) probeOutcome {
	switch {
	case err == nil:
		return probeAnswered
	case hosthealth.Classify(err) == hosthealth.Terminal:
		return probeRefused
	}
	return probeFailed
}

// probeState is what the schedule keeps of one host between probes.
type probeState struct {
	outcome  probeOutcome // of the last probe
	failures int          // consecutive failed probes, up to the last
	last     time.Time    // when the last probe ended; zero before the first
	retryAt  time.Time    // with probeFailed: when the host's backoff ends
	// hinted says that a hint came after the last probe: the next probe
	// is due at once. hintAt is when the last hint came; zero before.
	hinted bool
	hintAt time.Time
	// began is when the last probe was sent.
	began time.Time
}

// waitState is whether calls wait for a usable host, and since when.
type waitState struct {
	waiting bool
	since   time.Time // when the number of waiting calls last rose from zero
}

// observe returns st after a probe that ended at now with outcome o.
func (s probeSchedule) observe(st probeState, o probeOutcome, now time.Time) probeState {
	st.outcome, st.last, st.retryAt, st.hinted = o, now, time.Time{}, false
	if o != probeFailed {
		st.failures = 0
		return st
	}
	st.failures++
	st.retryAt = now.Add(s.jitter(s.backoff().Base(st.failures)))
	return st
}

// backoff is the curve of a host that cannot be reached:
// probeBackoffInitial doubling to probeBackoffMax, never beyond idle.
func (s probeSchedule) backoff() backoff.Exponential {
	return backoff.Exponential{Initial: probeBackoffInitial, Max: min(probeBackoffMax, s.idle)}
}

// hinted returns st after a topology source named the host the primary
// at now, when it had not claimed so before: the host's backoff is
// forgotten, as if it had never failed, and it is probed at once (see
// next). What the server answers still decides its role; a hint only
// moves the question forward.
func (s probeSchedule) hinted(st probeState, now time.Time) probeState {
	st.failures, st.retryAt, st.hinted, st.hintAt = 0, time.Time{}, true, now
	if st.outcome == probeFailed {
		st.outcome = probeAnswered // no backoff left to honour
	}
	return st
}

// next returns when the host with state st is probed next, as of now,
// unless a first waiter or a hint wakes it first (see woken, hinted).
// claimedPrimary says that a topology source claims the host is the
// primary.
func (s probeSchedule) next(st probeState, w waitState, claimedPrimary bool, now time.Time) time.Time {
	following := s.following(st, claimedPrimary)
	switch {
	case st.hinted:
		return now
	case st.outcome == probeRefused || (!w.waiting && !following):
		return st.last.Add(s.idle)
	case st.outcome == probeFailed:
		return st.retryAt
	case !w.waiting:
		return st.last.Add(s.jitter(min(max(st.last.Sub(st.hintAt), probeBackoffInitial), s.idle)))
	}
	return st.last.Add(s.jitter(s.waitInterval(now.Sub(s.curveStart(st, w, claimedPrimary)))))
}

// following reports whether a topology source named the host with state
// st the primary less than one idle ago, and still claims so.
func (s probeSchedule) following(st probeState, claimedPrimary bool) bool {
	return claimedPrimary && !st.hintAt.IsZero() && st.last.Sub(st.hintAt) < s.idle
}

// curveStart is where the wait's curve starts for the host with state st:
// when the calls began to wait, or when a source named the host the new
// primary during the wait, its curve starts again from there.
func (s probeSchedule) curveStart(st probeState, w waitState, claimedPrimary bool) time.Time {
	if s.following(st, claimedPrimary) && st.hintAt.After(w.since) {
		return st.hintAt
	}
	return w.since
}

// watchPlan is how a probe waits on the server for its host to become
// writable: up to checks checks, step apart. The zero plan does not wait.
type watchPlan struct {
	step   time.Duration
	checks int
}

// length is how long the server waits at most.
func (w watchPlan) length() time.Duration { return time.Duration(w.checks) * w.step }

const (
	// watchChecksPerInterval is how many times a watching server checks
	// whether it was promoted in the interval at which it would otherwise
	// be probed. A check is a timer wake-up of one backend, measured here
	// at 20-55 µs of server CPU against 180-200 µs for a probe's round
	// trip (its statement prepared), so two checks cost about half a probe
	// and halve the time to see a promotion.
	watchChecksPerInterval = 2
	// watchSpan is about how long one watch lasts: one round trip (a
	// probe's answer: role, zone, WAL position) per watchSpan.
	watchSpan = 200 * time.Millisecond
)

// watch returns how the next probe of a host waits on its server, as of
// now: while calls wait, for a host that answered its last probe in a role
// (read-only) that a promotion would make usable, promotable says so. The
// host is then asked whether it is still read-only every
// waitInterval/watchChecksPerInterval (never below probeFloor; the curve
// starts again when a source names the host the primary, as in next), on
// the server, for about watchSpan, and it answers at once when it is no
// longer. Otherwise the plan is zero and the host is polled.
func (s probeSchedule) watch(st probeState, w waitState, claimedPrimary, promotable bool, now time.Time) watchPlan {
	if !promotable || !w.waiting || st.outcome != probeAnswered {
		return watchPlan{}
	}
	step := max(probeFloor, s.waitInterval(now.Sub(s.curveStart(st, w, claimedPrimary)))/watchChecksPerInterval)
	return watchPlan{step: step, checks: max(1, int(watchSpan/step))}
}

// afterWatch returns when the probe after a watch with plan is sent: at
// once, unless the watch answered within one step of being sent (a server
// that became writable and read-only again in between, say), in which case
// it is paced one step after the last.
func (s probeSchedule) afterWatch(st probeState, plan watchPlan) time.Time {
	return st.began.Add(plan.step)
}

// waitInterval is the interval between probes of a reachable host once
// calls have waited for waited, before jitter: never above idle.
func (s probeSchedule) waitInterval(waited time.Duration) time.Duration {
	ceiling := max(min(s.waitMax, s.idle), probeFloor)
	return min(max(waited/probeGrowth, probeFloor), ceiling)
}

// woken returns when the host with state st is probed after the first
// waiter woke its loop at now: at once, unless the host is inside its own
// backoff.
func (s probeSchedule) woken(st probeState, now time.Time) time.Time {
	if st.outcome == probeFailed && st.retryAt.After(now) {
		return st.retryAt
	}
	return now
}

// jitter draws uniformly from [d/2, d] (backoff.DrawEqual), and never
// below probeFloor unless d is.
func (s probeSchedule) jitter(d time.Duration) time.Duration {
	return max(backoff.DrawEqual(d, s.rand), min(d, probeFloor))
}
