package failover

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// policy says whether a failed statement may run again on another host,
// and what its failure means.
type policy uint8

const (
	// replayable: running it again cannot repeat an effect, even after it
	// reached the server (connecting, BEGIN, a ping, a replay-safe read
	// before its first row reached the caller).
	replayable policy = 1 << iota
	// resendIfUnsent: it may run again when it provably did nothing.
	resendIfUnsent
	// mayWrite: it may write, so when it is cut off in flight its outcome
	// is unknown, and when it succeeds it may have changed data.
	mayWrite

	// Common combinations.
	idempotent    = replayable | resendIfUnsent
	writeOnce     = resendIfUnsent | mayWrite // a write: sent again only when it provably did nothing
	readOnce      = resendIfUnsent            // a read that is not to be replayed
	rowsDelivered = policy(0)                 // a read part of whose result reached the caller
)

// delivered returns p once part of the statement's result has reached the
// caller, or the caller closed it: it is never sent again, and only
// whether it may have written still counts.
func (p policy) delivered() policy { return p & mayWrite }

// failure is everything the retry decision looks at after an attempt
// failed. classify fills in what the error and the statement say; the
// call's own progress (failedOver, attempts, timeLeft) is read after the
// host has been marked, which starts the call's failover episode.
type failure struct {
	class       hosthealth.Class // what hosthealth says the error means
	byChoice    bool             // a 25006 that the application's own settings caused (readOnlyByChoice)
	roleRefused bool             // a connection refused for its server's role (*hosthealth.RoleError)
	takesReads  bool             // the call's target accepts read-only servers
	didNotRun   bool             // the error proves the statement did nothing
	answered    bool             // the server sent an error about the statement (a *pgconn.PgError)
	rule        policy           // what the statement allows
	callerDone  bool             // the caller's context has ended
	failedOver  bool             // the call was already failing over: it met a failover event or waited
	attempts    int              // re-sendable failures counted before this one
	maxAttempts int
	timeLeft    bool // the call's failover deadline has not passed
}

// classify reads what err says for the retry decision of a statement
// with policy rule, on a call for target. It also returns the error to
// report: a readOnlyByChoice is unwrapped.
func classify(err error, rule policy, target hosthealth.Target) (failure, error) {
	f := failure{class: hosthealth.Classify(err), rule: rule, takesReads: target.Accepts(hosthealth.RoleReplica)}
	if rc, ok := err.(*readOnlyByChoice); ok {
		err, f.byChoice = rc.err, true
	}
	_, f.roleRefused = errors.AsType[*hosthealth.RoleError](err)
	_, f.answered = errors.AsType[*pgconn.PgError](err)
	f.didNotRun = hosthealth.DidNotRun(err)
	return f, err
}

// meaning is what the failure means for this call: hosthealth's class,
// except that a read-only refusal the application chose is an ordinary
// error, and so is a write refused by a read-only server when the target
// takes read-only servers (as with libpq: no other host is better placed
// to run it). A connection refused for its server's role is still a
// failover event.
func (f *failure) meaning() hosthealth.Class {
	switch {
	case f.byChoice:
		return hosthealth.NotFailover
	case f.class == hosthealth.Topology && f.takesReads && !f.roleRefused:
		return hosthealth.NotFailover
	}
	return f.class
}

// marks reports whether the host is marked failed (its health, the
// fallback), and records whether the failure is an event of the call's
// failover episode (its span, the host's outcome). A caller that gave up
// says nothing about the host.
func (f *failure) marks() (mark, record bool) {
	if f.callerDone {
		return false, false
	}
	class := f.meaning()
	return class != hosthealth.NotFailover && class != hosthealth.Terminal, class != hosthealth.NotFailover
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
	class := f.meaning()
	if f.callerDone {
		// The caller gave up; nothing is retried. A write cut off in
		// flight may still commit, unless the server answered it with an
		// error.
		answered := f.answered && class == hosthealth.NotFailover
		switch {
		case f.rule&mayWrite != 0 && !f.didNotRun && !answered:
			return failUnknown, false
		case f.failedOver && f.rule&idempotent != 0:
			// It would have moved on, but the deadline came first.
			return failBudget, false
		}
		return passThrough, false
	}
	switch class {
	case hosthealth.NotFailover:
		return passThrough, false
	case hosthealth.Terminal:
		// Credentials and database names are the same on every host, so
		// trying the others would only fill their logs.
		return failHost, false
	}
	if f.rule&replayable == 0 && !(f.didNotRun && f.rule&resendIfUnsent != 0) {
		switch {
		case f.didNotRun:
			// It did nothing, but cannot be sent again (COPY has
			// consumed its rows).
			return failHost, false
		case f.rule&mayWrite != 0 && class == hosthealth.Transport:
			return failUnknown, false
		}
		return failHost, false
	}
	if class == hosthealth.Topology {
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
