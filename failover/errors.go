package failover

import "github.com/pgfailover/pgfailover/failover/internal/engine"

// Sentinel errors. Every error the Pool returns for a failover decision wraps
// one of these, so callers branch with errors.Is.
var (
	// ErrNoHost means no host could satisfy the target. From New: no host
	// was reachable in a role the target accepts, or the host list is
	// empty. From a call: the call waited for a usable host until its
	// budget or deadline ran out, and every host was then known to be in
	// the wrong role for the target (a call that ran out otherwise gets
	// ErrBudgetExhausted).
	ErrNoHost = engine.ErrNoHost

	// ErrBudgetExhausted means the call was still failing over when its
	// budget (failover_max_attempts, failover_max_duration, or the
	// caller's context: its deadline, or its cancellation as Cause) ran
	// out.
	ErrBudgetExhausted = engine.ErrBudgetExhausted

	// ErrClosed means the Pool was closed.
	ErrClosed = engine.ErrClosed

	// ErrTxInterrupted means the connection of an open transaction died
	// before COMMIT was sent. The server rolls such a transaction back, so
	// none of it took effect; the next Begin lands on a working host.
	ErrTxInterrupted = engine.ErrTxInterrupted

	// ErrCommitOutcomeUnknown means a COMMIT, or a statement outside a
	// transaction that may write, was in flight when its connection died
	// or the caller's context ended, and the server had neither answered
	// it nor provably refused it. It may or may not have taken effect;
	// pgfailover never runs it again and never reports it as a success.
	// After any other error the statement did not commit: the rule, and
	// where it holds, is
	// https://github.com/pgfailover/pgfailover/blob/main/docs/errors.md#the-rule.
	ErrCommitOutcomeUnknown = engine.ErrCommitOutcomeUnknown
)

// HostError is the outcome of one host: the error it gave when it was
// tried. Addr is host:port; it never contains credentials. Kind, when set,
// is the sentinel (ErrTxInterrupted, ErrCommitOutcomeUnknown) saying what
// the error means for the caller; Err is the host's error. It unwraps to
// both.
type HostError = engine.HostError

// FailoverError reports a call that could not complete on any host. It wraps
// its kind (ErrNoHost or ErrBudgetExhausted), so errors.Is works on it, and
// every host's last outcome, so errors.As finds a *pgconn.PgError or a
// *HostError inside. Cause is the caller's context error when that ended
// the walk, else nil; Attempts counts the attempts that counted against
// failover_max_attempts; Hosts holds the last outcome of each host, those
// tried first in the order tried.
type FailoverError = engine.FailoverError
