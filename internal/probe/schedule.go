package probe

import (
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/backoff"
	"github.com/pgfailover/pgfailover/internal/outcome"
)

// Schedule says when a host's probe loop probes next. It only
// computes: the loop passes in the Pool's clock readings and what the
// last probe found, and the jitter is drawn from Rand.
//
// Every probe wakes a server process, and every instance of an application
// probes every host, so the schedule is a cost budget as much as a latency
// one:
//
//   - no call waits: every idle (health_probe_interval); a host the Pool
//     does not use (Dormant: a replica when neither the target nor the
//     Reader reads from one) every dormantFactor idles, on a connection
//     the Pool gives up after each answer;
//   - calls wait, the host answered its last probe: the wait's age divided
//     by growth, at least Floor and at most WaitMax
//     (health_probe_wait_max) and idle, jittered into [½, 1] of that
//     (never below Floor), so that instances woken by the same crash do
//     not probe in step;
//   - calls wait for a primary and the host is a replica that a promotion
//     would make usable: the probe watches instead (see Watch). It waits
//     on the server, which checks twice per interval of the curve above
//     whether it is still read-only and answers as soon as it is not; the
//     next watch starts as soon as the last one has answered;
//   - a topology source names the host the new primary (a hint, see
//     Hinted): the host goes to the front. Its backoff is forgotten and it
//     is probed at once, waiting or not. A source names a leader before its
//     server has finished promoting, so for one idle after the hint, while
//     the claim stands, the host is followed up: while calls wait, on the
//     curve above counted from the hint instead of from the wait's start
//     (2ms apart at first); while none waits, each interval as long as the
//     time since the hint (from backoffInitial: about 9 probes with
//     the defaults); a host that cannot be reached keeps its backoff,
//     started again from the first step. Its server's answer still decides
//     its role;
//   - calls wait for a primary, and the host's name leads to a standby
//     that streams WAL from a primary elsewhere (Lagging): the name may
//     lag behind a promotion (a cloud endpoint, a Kubernetes Service or a
//     DNS name that still leads to the old primary). Besides the watch,
//     the probe then gives up its connection and opens another through
//     the name every recheckInterval of the wait's age, jittered into
//     [½, 1]: Recheck at first, growing to idle in a wait that goes on
//     (see Fresh); never when Recheck is 0. A login costs the server far more than a probe's
//     round trip, so this is the only case that reconnects a host that
//     answers;
//   - the host could not be reached (refused, timed out, reset): a
//     backoff of its own on the module's one curve
//     (backoff.Exponential), backoffInitial doubling with each failure up
//     to backoffMax (and never beyond idle), each step jittered into
//     [½, 1] (backoff.DrawEqual); while calls wait, up to waitBackoffMax
//     only, so that a name that starts leading to a live server is
//     followed within that: an address where nothing listens costs no
//     server anything;
//   - the server refused for now (too many clients, starting up: Busy):
//     the same backoff up to backoffMax, waiting or not, so that a full
//     server is not stormed;
//   - the server refused the credentials or the database: every idle
//     (every dormantFactor idles for a Dormant host), waiting or not;
//     faster would only fill the server's log.
//
// The first call to wait wakes every probe at once (see Woken): that is
// what makes a promotion that happened before the wait seen at once. A
// host inside its backoff is still not dialled before the backoff ends.
type Schedule struct {
	Idle    time.Duration // health_probe_interval
	WaitMax time.Duration // health_probe_wait_max
	// Recheck is the shortest interval between two fresh connections of
	// a Lagging host (name_recheck_interval); 0 opens none.
	Recheck time.Duration
	Rand    backoff.Rand // uniform in [0, n), n > 0
}

const (
	// Floor is the shortest interval between two probes of a host.
	Floor = 2 * time.Millisecond
	// growth is the ratio of the time calls have waited to the
	// interval between probes of a reachable host: after 100 ms of waiting
	// a host is probed about every 10 ms (jitter aside).
	growth = 10
	// backoffInitial and backoffMax bound the backoff of a host
	// that cannot be reached: a dead host is dialled about 8 times in the
	// first second and then 2-4 times a second.
	backoffInitial = 5 * time.Millisecond
	backoffMax     = 500 * time.Millisecond
	// waitBackoffMax bounds that backoff while calls wait: a name that
	// moves from a dead server to a live one is followed within it (a
	// dial to an address where nothing listens costs no server anything;
	// through a forwarder, one accept).
	waitBackoffMax = 150 * time.Millisecond
	// recheckGrowth shapes the interval between the fresh connections of
	// a Lagging host: the wait's age divided by recheckGrowth, at least
	// Recheck, at most idle. A login costs the server 20-40 ms of CPU on
	// the test machine (a fork there costs 20 ms; a few ms on common
	// hardware), 100 times a probe's round trip or more: at most one
	// each Recheck for the first seconds of a wait, then fewer, bounds
	// what a Pool costs the server its name leads to.
	recheckGrowth = 50
	// dormantFactor is how many idles apart a Dormant host is probed
	// while no call waits: each probe is a login there, 20-30 ms of the
	// server's CPU on the test machine, about 100 times a probe's round
	// trip on a connection held open; one every 10 s costs it about as
	// much as a probe a second, and holds no connection.
	dormantFactor = 10
)

// Finding is what a host's last probe came to, as the schedule sees
// it.
type Finding int

const (
	// Answered: the server answered (or the host was not probed yet).
	Answered Finding = iota
	// Failed: the host could not be reached, or the connection broke.
	Failed
	// Refused: the server refused the credentials or the database.
	Refused
	// Busy: the server refused for now (too many clients, starting up).
	Busy
	// Lagging: the server answered as a standby that streams WAL from a
	// primary elsewhere, while the Pool needs a primary: the host's name
	// may lag behind a promotion, and is rechecked (see Schedule.Fresh).
	Lagging
)

// String returns the finding's name.
func (o Finding) String() string {
	switch o {
	case Answered:
		return "answered"
	case Failed:
		return "failed"
	case Refused:
		return "refused"
	case Busy:
		return "busy"
	case Lagging:
		return "lagging"
	}
	return "Finding(?)"
}

// FindingOf sorts a probe's error into a Finding: Answered, Refused
// when outcome.Decide would end a connect on it (outcome.EndsConnect),
// Busy when it means a server that asks to be tried later, else Failed.
// Whether an answer is Lagging is the caller's to say.
func FindingOf(err error) Finding {
	switch {
	case err == nil:
		return Answered
	case outcome.EndsConnect(err, hosthealth.TargetAny):
		return Refused
	}
	f, _ := outcome.Describe(err, outcome.Connect, outcome.Idempotent, hosthealth.TargetAny)
	if f.Meaning() == hosthealth.Transient {
		return Busy
	}
	return Failed
}

// State is what the schedule keeps of one host between probes.
type State struct {
	Found    Finding   // of the last probe
	Failures int       // consecutive failed probes, up to the last
	Last     time.Time // when the last probe ended; zero before the first
	RetryAt  time.Time // with Failed or Busy: when the host's backoff ends
	// FreshAt, with Lagging, is when the probe next opens a fresh
	// connection through the host's name; zero until it is drawn.
	FreshAt time.Time
	// HintPending says that a hint came after the last probe: the next
	// probe is due at once. HintAt is when the last hint came; zero before.
	HintPending bool
	HintAt      time.Time
	// Began is when the last probe was sent.
	Began time.Time
	// Dormant says that the Pool does not use the host (see
	// Subject.InUse): it is probed dormantFactor times less often while no
	// call waits.
	Dormant bool
}

// Wait is whether calls wait for a usable host, and since when.
type Wait struct {
	Waiting bool
	Since   time.Time // when the number of waiting calls last rose from zero
}

// Observe returns st after a probe that ended at now with finding o; w is
// whether calls waited as it began. A probe sent on a fresh connection
// (Plan.Fresh) is observed with st.FreshAt cleared, so that the next one
// is drawn from now.
func (s Schedule) Observe(st State, o Finding, w Wait, now time.Time) State {
	st.Found, st.Last, st.RetryAt, st.HintPending = o, now, time.Time{}, false
	if o == Lagging && s.Recheck > 0 {
		if st.FreshAt.IsZero() {
			st.FreshAt = now.Add(s.jitter(s.recheckInterval(w, now)))
		}
	} else {
		st.FreshAt = time.Time{}
	}
	if o != Failed && o != Busy {
		st.Failures = 0
		return st
	}
	st.Failures++
	curve := s.backoff()
	if o == Failed && w.Waiting {
		curve.Max = min(curve.Max, waitBackoffMax)
	}
	st.RetryAt = now.Add(s.jitter(curve.Base(st.Failures)))
	return st
}

// recheckInterval is the interval between two fresh connections of a
// Lagging host as of now, before jitter: the wait's age over
// recheckGrowth, at least Recheck, at most idle (or Recheck, when
// longer); idle while no call waits.
func (s Schedule) recheckInterval(w Wait, now time.Time) time.Duration {
	if !w.Waiting {
		return max(s.Idle, s.Recheck)
	}
	return min(max(now.Sub(w.Since)/recheckGrowth, s.Recheck), max(s.Idle, s.Recheck))
}

// Fresh reports whether the probe sent at now opens a fresh connection
// through the host's name: while calls wait, for a Lagging host whose
// next fresh connection is due.
func (s Schedule) Fresh(st State, w Wait, now time.Time) bool {
	return st.Found == Lagging && w.Waiting && !st.FreshAt.IsZero() && !now.Before(st.FreshAt)
}

// backoff is the curve of a host that cannot be reached:
// backoffInitial doubling to backoffMax, never beyond idle.
func (s Schedule) backoff() backoff.Exponential {
	return backoff.Exponential{Initial: backoffInitial, Max: min(backoffMax, s.Idle)}
}

// Hinted returns st after a topology source named the host the primary
// at now, when it had not claimed so before: the host's backoff is
// forgotten, as if it had never failed, and it is probed at once (see
// next). What the server answers still decides its role; a hint only
// moves the question forward.
func (s Schedule) Hinted(st State, now time.Time) State {
	st.Failures, st.RetryAt, st.HintPending, st.HintAt = 0, time.Time{}, true, now
	if st.Found == Failed || st.Found == Busy {
		st.Found = Answered // no backoff left to honour
	}
	return st
}

// Next returns when the host with state st is probed next, as of now,
// unless a first waiter or a hint wakes it first (see Woken, Hinted).
// claimedPrimary says that a topology source claims the host is the
// primary.
func (s Schedule) Next(st State, w Wait, claimedPrimary bool, now time.Time) time.Time {
	following := s.following(st, claimedPrimary)
	switch {
	case st.HintPending:
		return now
	case st.Found == Refused || (!w.Waiting && !following):
		if st.Dormant {
			return st.Last.Add(dormantFactor * s.Idle)
		}
		return st.Last.Add(s.Idle)
	case st.Found == Failed || st.Found == Busy:
		return st.RetryAt
	case !w.Waiting:
		return st.Last.Add(s.jitter(min(max(st.Last.Sub(st.HintAt), backoffInitial), s.Idle)))
	}
	at := st.Last.Add(s.jitter(s.waitInterval(now.Sub(s.curveStart(st, w, claimedPrimary)))))
	if st.Found == Lagging && !st.FreshAt.IsZero() && st.FreshAt.Before(at) {
		return st.FreshAt
	}
	return at
}

// following reports whether a topology source named the host with state
// st the primary less than one idle ago, and still claims so.
func (s Schedule) following(st State, claimedPrimary bool) bool {
	return claimedPrimary && !st.HintAt.IsZero() && st.Last.Sub(st.HintAt) < s.Idle
}

// curveStart is where the wait's curve starts for the host with state st:
// when the calls began to wait, or when a source named the host the new
// primary during the wait, its curve starts again from there.
func (s Schedule) curveStart(st State, w Wait, claimedPrimary bool) time.Time {
	if s.following(st, claimedPrimary) && st.HintAt.After(w.Since) {
		return st.HintAt
	}
	return w.Since
}

// Watch is how a probe waits on the server for its host to become
// writable: up to checks checks, step apart. The zero plan does not wait.
type Watch struct {
	Step   time.Duration
	Checks int
}

// Length is how long the server waits at most.
func (w Watch) Length() time.Duration { return time.Duration(w.Checks) * w.Step }

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

// Watch returns how the next probe of a host waits on its server, as of
// now: while calls wait, for a host that answered its last probe in a role
// (read-only) that a promotion would make usable, promotable says so. The
// host is then asked whether it is still read-only every
// waitInterval/watchChecksPerInterval (never below Floor; the curve
// starts again when a source names the host the primary, as in next), on
// the server, for about watchSpan (a Lagging host: at most one
// recheckInterval, when its next fresh connection is due), and it answers
// at once when it is no longer. Otherwise the plan is zero and the host is polled.
func (s Schedule) Watch(st State, w Wait, claimedPrimary, promotable bool, now time.Time) Watch {
	if !promotable || !w.Waiting || (st.Found != Answered && st.Found != Lagging) {
		return Watch{}
	}
	step := max(Floor, s.waitInterval(now.Sub(s.curveStart(st, w, claimedPrimary)))/watchChecksPerInterval)
	span := watchSpan
	if st.Found == Lagging && s.Recheck > 0 {
		// The watch ends about when the next fresh connection is due.
		span = min(span, s.recheckInterval(w, now))
	}
	return Watch{Step: step, Checks: max(1, int(span/step))}
}

// AfterWatch returns when the probe after a watch with plan is sent: at
// once, unless the watch answered within one step of being sent (a server
// that became writable and read-only again in between, say), in which case
// it is paced one step after the last.
func (s Schedule) AfterWatch(st State, plan Watch) time.Time {
	return st.Began.Add(plan.Step)
}

// waitInterval is the interval between probes of a reachable host once
// calls have waited for waited, before jitter: never above idle.
func (s Schedule) waitInterval(waited time.Duration) time.Duration {
	ceiling := max(min(s.WaitMax, s.Idle), Floor)
	return min(max(waited/growth, Floor), ceiling)
}

// Woken returns when the host with state st is probed after the first
// waiter woke its loop at now: at once, unless the host is inside its own
// backoff.
func (s Schedule) Woken(st State, now time.Time) time.Time {
	if (st.Found == Failed || st.Found == Busy) && st.RetryAt.After(now) {
		return st.RetryAt
	}
	return now
}

// jitter draws uniformly from [d/2, d] (backoff.DrawEqual), and never
// below Floor unless d is.
func (s Schedule) jitter(d time.Duration) time.Duration {
	return max(backoff.DrawEqual(d, s.Rand), min(d, Floor))
}
