package outcome

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// Rule says whether a statement may run again on another host, and what
// its failure means.
type Rule uint8

const (
	// Replayable: running it again cannot repeat an effect, even after it
	// reached the server (connecting, BEGIN, a ping, a replay-safe read
	// before its first row reached the caller).
	Replayable Rule = 1 << iota
	// ResendIfUnsent: it may run again when it provably did nothing.
	ResendIfUnsent
	// MayWrite: it may write, so when it is cut off in flight its outcome
	// is unknown, and when it succeeds it may have changed data.
	MayWrite

	// Common combinations.
	Idempotent    = Replayable | ResendIfUnsent
	WriteOnce     = ResendIfUnsent | MayWrite // a write: sent again only when it provably did nothing
	ReadOnce      = ResendIfUnsent            // a read that is not to be replayed
	RowsDelivered = Rule(0)                   // a read part of whose result reached the caller
)

// Delivered returns r once part of the statement's result has reached the
// caller, or the caller closed it: it is never sent again, and only
// whether it may have written still counts.
func (r Rule) Delivered() Rule { return r & MayWrite }

// Phase is where a statement stood when it failed.
type Phase uint8

const (
	// Call: a statement of a Pool call, which the Pool may run again on
	// another host as its Rule allows.
	Call Phase = iota
	// Held: a statement outside a transaction on a connection the caller
	// holds (database/sql's): it is never moved.
	Held
	// InTx: a statement inside a transaction, a savepoint's release or
	// ROLLBACK included. The transaction is pinned to its host.
	InTx
	// Commit: COMMIT of a transaction (or another transaction control
	// statement sent as SQL inside one).
	Commit
	// Connect: getting a connection of the host a call picked, or
	// opening one for a long-lived session. Nothing was sent, so the
	// call may always move to another host; its Rule is Idempotent.
	Connect
)

var phaseNames = [...]string{"call", "held", "in-tx", "commit", "connect"}

func (p Phase) String() string { return phaseNames[p] }

// Failure is everything the decision looks at after an attempt failed.
// Describe fills in what the error and the statement say; the caller adds
// its own progress (CallerDone, and for a Call FailedOver, Attempts,
// MaxAttempts and TimeLeft), as it stood before this failure; marking the
// host is one of the effects of the decision.
type Failure struct {
	Phase       Phase
	Class       hosthealth.Class // what hosthealth says the error means
	ByChoice    bool             // a 25006 that the application's own settings caused (*ByChoiceError)
	RoleRefused bool             // a connection refused for its server's role (*hosthealth.RoleError)
	TakesReads  bool             // the call's target accepts read-only servers
	DidNotRun   bool             // the error proves the statement did nothing
	Answered    bool             // the server sent an error about the statement (a *pgconn.PgError)
	Rule        Rule             // what the statement allows
	CallerDone  bool             // the caller's context has ended
	FailedOver  bool             // the call was already failing over: it met a failover event or waited
	Attempts    int              // re-sendable failures counted before this one
	MaxAttempts int
	TimeLeft    bool // the call's failover deadline has not passed
	// HostGone, for a Connect: the host left the topology, or was found
	// unusable, while the call waited for its connection.
	HostGone bool
}

// CallerDone reports whether the caller's context, ctx, has ended: the
// package's one test of it (Failure.CallerDone). A failure met after the
// caller gave up says nothing of the host, and a write cut off then may
// still commit.
func CallerDone(ctx context.Context) bool { return ctx.Err() != nil }

// Describe reads what err says for the decision on a statement in phase
// with rule, on a call for target. It also returns the error to report: a
// *ByChoiceError is unwrapped.
func Describe(err error, phase Phase, rule Rule, target hosthealth.Target) (Failure, error) {
	f := Failure{Phase: phase, Class: hosthealth.Classify(err), Rule: rule, TakesReads: target.Accepts(hosthealth.RoleReplica)}
	if bc, ok := err.(*ByChoiceError); ok {
		err, f.ByChoice = bc.Err, true
	}
	_, f.RoleRefused = errors.AsType[*hosthealth.RoleError](err)
	_, f.Answered = errors.AsType[*pgconn.PgError](err)
	_, notSent := errors.AsType[*NotSentError](err)
	f.DidNotRun = notSent || hosthealth.DidNotRun(err)
	return f, err
}

// ByChoiceError marks a 25006 (read-only transaction) that the
// application's own settings caused: a read-only transaction, role or
// database setting. It is an ordinary error, not news of the host.
type ByChoiceError struct{ Err error }

func (e *ByChoiceError) Error() string { return e.Err.Error() }
func (e *ByChoiceError) Unwrap() error { return e.Err }

// Meaning is what the failure means for the host: hosthealth's class,
// except that a read-only refusal the application chose is an ordinary
// error, and so is a write refused by a read-only server when the target
// takes read-only servers (as with libpq: no other host is better placed
// to run it). A connection refused for its server's role is still a
// failover event.
func (f *Failure) Meaning() hosthealth.Class {
	switch {
	case f.ByChoice:
		return hosthealth.NotFailover
	case f.Class == hosthealth.Topology && f.TakesReads && !f.RoleRefused:
		return hosthealth.NotFailover
	}
	return f.Class
}

// Verdict is what to do with a failed attempt.
type Verdict uint8

const (
	// PassThrough: not a failover event; return the error unchanged.
	PassThrough Verdict = iota
	// TryNext: run the statement again on the next usable host.
	TryNext
	// FailHost: return the error, naming the host.
	FailHost
	// FailUnknown: the statement may have committed; return the error
	// wrapped in the commit-outcome-unknown sentinel.
	FailUnknown
	// FailInterrupted: the transaction's connection died before COMMIT
	// ran; nothing of it committed. Return the error wrapped in the
	// transaction-interrupted sentinel.
	FailInterrupted
	// FailBudget: stop: the failover budget is spent.
	FailBudget
)

var verdictNames = [...]string{"pass-through", "try-next", "fail-host", "fail-unknown-outcome", "fail-interrupted", "fail-budget"}

func (v Verdict) String() string { return verdictNames[v] }

// Decision is the outcome of a failed attempt.
type Decision struct {
	Verdict Verdict
	// Counts: the attempt uses one of failover_max_attempts, and the host
	// is held back for a backoff before the call sends there again.
	Counts bool
	// Mark: the host is marked failed with Meaning (its health, and the
	// topology source's view).
	Mark bool
	// Record: the failure is an event of the call's failover episode (its
	// span, the host's outcome in a *FailoverError).
	Record bool
	// Note: the failure is kept as the host's outcome in the call's
	// error, unless one is kept already, though it is no event of the
	// episode.
	Note bool
	// Meaning is the failure's meaning (Failure.Meaning).
	Meaning hosthealth.Class
}

// Decide is the decision: a pure function of the failure.
func Decide(f Failure) Decision {
	d := Decision{Meaning: f.Meaning()}
	switch f.Phase {
	case Call:
		d.Mark, d.Record = f.marks(d.Meaning)
		d.Verdict, d.Counts = decideCall(f, d.Meaning)
	case Connect:
		return decideConnect(f, d)
	default:
		// A statement that cannot move: only a dead connection is news of
		// its host. A refused write (25006) inside a transaction comes from
		// the transaction's own read-only mode or the role's settings; a
		// real demotion is caught when connections are handed out and by
		// the probes. A caller that gave up says nothing of the host.
		d.Mark = f.Class == hosthealth.Transport && !f.CallerDone
		d.Verdict = decidePinned(f)
	}
	return d
}

// EndsConnect reports whether Decide ends a connect that failed with err
// on its host for target, with time and attempts left: no other host,
// and no later try, would do better (a refused password, an unknown
// database). A Pool's first connects and its probes' schedule read it.
func EndsConnect(err error, target hosthealth.Target) bool {
	f, _ := Describe(err, Connect, Idempotent, target)
	f.MaxAttempts, f.TimeLeft = 2, true
	return Decide(f).Verdict == FailHost
}

// marks reports, for a Call, whether the host is marked failed and whether
// the failure is an event of the call's failover episode. A caller that
// gave up says nothing about the host.
func (f *Failure) marks(class hosthealth.Class) (mark, record bool) {
	if f.CallerDone {
		return false, false
	}
	return class != hosthealth.NotFailover && class != hosthealth.Terminal, class != hosthealth.NotFailover
}

// decideCall is the retry decision of a Pool call. counts reports whether
// the attempt uses one of failover_max_attempts: a host in the wrong role
// is passed over for free, since refusing is proof that nothing ran there.
func decideCall(f Failure, class hosthealth.Class) (v Verdict, counts bool) {
	if f.CallerDone {
		// The caller gave up; nothing is retried. A write cut off in
		// flight may still commit, unless the server answered it with an
		// error.
		answered := f.Answered && class == hosthealth.NotFailover
		switch {
		case f.Rule&MayWrite != 0 && !f.DidNotRun && !answered:
			return FailUnknown, false
		case f.FailedOver && f.Rule&Idempotent != 0:
			// It would have moved on, but the deadline came first.
			return FailBudget, false
		}
		return PassThrough, false
	}
	switch class {
	case hosthealth.NotFailover:
		return PassThrough, false
	case hosthealth.Terminal:
		// Credentials and database names are the same on every host, so
		// trying the others would only fill their logs.
		return FailHost, false
	}
	if f.Rule&Replayable == 0 && !(f.DidNotRun && f.Rule&ResendIfUnsent != 0) {
		switch {
		case f.DidNotRun:
			// It did nothing, but cannot be sent again (COPY has
			// consumed its rows).
			return FailHost, false
		case f.Rule&MayWrite != 0 && class == hosthealth.Transport:
			return FailUnknown, false
		}
		return FailHost, false
	}
	if class == hosthealth.Topology {
		if !f.TimeLeft {
			return FailBudget, false
		}
		return TryNext, false
	}
	if f.Attempts+1 >= f.MaxAttempts || !f.TimeLeft {
		return FailBudget, true
	}
	return TryNext, true
}

// decideConnect decides for a connection that could not be had: as for a
// call's Idempotent attempt, but for what only waiting for a connection
// meets. A host that went away meanwhile is passed over, as news already
// taken. A dial cut short by the call's failover deadline ends the call
// on its budget, and says nothing of the host. A caller that gave up
// before any failover event ends the call on the host it waited for.
func decideConnect(f Failure, d Decision) Decision {
	switch {
	case f.HostGone:
		d.Verdict = TryNext
		return d
	case !f.CallerDone && f.FailedOver && !f.TimeLeft:
		d.Verdict, d.Note = FailBudget, true
		return d
	case f.CallerDone && !f.FailedOver:
		d.Verdict = FailHost
		return d
	}
	f.Rule = Idempotent
	d.Mark, d.Record = f.marks(d.Meaning)
	d.Verdict, d.Counts = decideCall(f, d.Meaning)
	return d
}

// decidePinned decides for a statement that cannot move to another host:
// one on a held connection, inside a transaction, or COMMIT.
func decidePinned(f Failure) Verdict {
	answered := f.Answered && f.Class == hosthealth.NotFailover
	switch f.Phase {
	case Held:
		// Lost in flight when the connection broke, or when the caller's
		// context ended before the server answered (the client then
		// closes the connection). A read lost nothing but its answer.
		cut := f.Class == hosthealth.Transport || (f.CallerDone && !f.Answered)
		if f.DidNotRun || !cut || f.Rule&MayWrite == 0 {
			return PassThrough
		}
		return FailUnknown
	case InTx:
		// The caller's own deadline is not the host's fault, and the
		// caller knows of it: its error is returned as is (a transaction
		// function is not run again after it).
		if f.CallerDone || f.Class != hosthealth.Transport {
			return PassThrough
		}
		return FailInterrupted
	}
	// Commit.
	switch {
	case f.DidNotRun:
		// COMMIT never ran: the server rolls the transaction back.
		return FailInterrupted
	case answered:
		return PassThrough // a serialization failure, a deferred constraint
	case f.CallerDone || f.Class == hosthealth.Transport:
		// Cut off, or given up on, with COMMIT in flight.
		return FailUnknown
	}
	return PassThrough
}

// NotSentError wraps the reason a statement was never sent: its
// connection was found dead before it. Describe reports it as DidNotRun,
// whatever it wraps (pgconn.ErrConnClosed alone would not say so).
type NotSentError struct{ Err error }

func (e *NotSentError) Error() string { return e.Err.Error() }
func (e *NotSentError) Unwrap() error { return e.Err }
