package failover

import "github.com/pgfailover/pgfailover/hosthealth"

// policy says whether a failed statement may run again on another host,
// and what its failure means.
type policy uint8

const (
	// replayable: running it again cannot repeat an effect, even after it
	// reached the server (connecting, BEGIN, a ping, a replay-safe read
	// before its first row reached the caller).
	replayable policy = 1 << iota
	// retryUnsent: it may run again when it provably did nothing.
	retryUnsent
	// writes: it may write, so when it is cut off in flight its outcome is
	// unknown, and when it succeeds it may have changed data.
	writes

	// Common combinations.
	idempotent = replayable | retryUnsent
	write      = retryUnsent | writes
	readOnce   = retryUnsent // a read that is not to be replayed
	delivered  = policy(0)   // part of its result reached the caller
)

// failure is everything the retry decision looks at after an attempt
// failed.
type failure struct {
	class       hosthealth.Class // what the error means for failover
	didNotRun   bool             // the error proves the statement did nothing
	answered    bool             // the server answered the statement with an error: it did not commit
	rule        policy           // what the statement allows
	callerDone  bool             // the caller's context has ended
	failedOver  bool             // the call was already failing over: it met a failover event or waited
	attempts    int              // re-sendable failures counted before this one
	maxAttempts int
	timeLeft    bool // the call's failover deadline has not passed
}

// verdict is what to do with a failed attempt.
type verdict uint8

const (
	// passThrough: not a failover event; return the error unchanged.
	passThrough verdict = iota
	// tryNext: run the statement again on the next usable host.
	tryNext
	// failHost: return the error, naming the host.
	failHost
	// failUnknown: return the error wrapped in ErrCommitOutcomeUnknown.
	failUnknown
	// failBudget: stop with ErrBudgetExhausted.
	failBudget
)

var verdictNames = [...]string{"pass-through", "try-next", "fail-host", "fail-unknown-outcome", "fail-budget"}

func (v verdict) String() string { return verdictNames[v] }

// decide is the retry decision: a pure function of the failure. counts
// reports whether the attempt uses one of failover_max_attempts: a host in
// the wrong role is passed over for free, since refusing is proof that
// nothing ran there.
func decide(f failure) (v verdict, counts bool) {
	if f.callerDone {
		// The caller gave up; nothing is retried. A write cut off in
		// flight may still commit.
		switch {
		case f.rule&writes != 0 && !f.didNotRun && !f.answered:
			return failUnknown, false
		case f.failedOver && f.rule&(replayable|retryUnsent) != 0:
			// It would have moved on, but the deadline came first.
			return failBudget, false
		}
		return passThrough, false
	}
	switch f.class {
	case hosthealth.NotFailover:
		return passThrough, false
	case hosthealth.Terminal:
		// Credentials and database names are the same on every host, so
		// trying the others would only fill their logs.
		return failHost, false
	}
	if f.rule&replayable == 0 && !(f.didNotRun && f.rule&retryUnsent != 0) {
		switch {
		case f.didNotRun:
			// It did nothing, but cannot be sent again (COPY has
			// consumed its rows).
			return failHost, false
		case f.rule&writes != 0 && f.class == hosthealth.Transport:
			return failUnknown, false
		}
		return failHost, false
	}
	if f.class == hosthealth.Topology {
		if !f.timeLeft {
			return failBudget, false
		}
		return tryNext, false
	}
	if f.attempts+1 >= f.maxAttempts || !f.timeLeft {
		return failBudget, true
	}
	return tryNext, true
}
