package failover

import (
	"errors"
	"strings"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/outcome"
)

// Sentinel errors. Every error the Pool returns for a failover decision wraps
// one of these, so callers branch with errors.Is.
var (
	// ErrNoHost means no host could satisfy the target. From New: no host
	// was reachable in a role the target accepts, or the host list is
	// empty. From a call: the call waited for a usable host until its
	// budget or deadline ran out, and every host was then known to be in
	// the wrong role for the target (a call that ran out otherwise gets
	// ErrBudgetExhausted).
	ErrNoHost = errors.New("pgfailover: no host satisfies the target")

	// ErrBudgetExhausted means the call was still failing over when its
	// budget (failover_max_attempts, failover_max_duration, or the
	// caller's context: its deadline, or its cancellation as Cause) ran
	// out.
	ErrBudgetExhausted = errors.New("pgfailover: failover budget exhausted")

	// ErrClosed means the Pool was closed.
	ErrClosed = errors.New("pgfailover: pool closed")

	// ErrTxInterrupted means the connection of an open transaction died
	// before COMMIT was sent. The server rolls such a transaction back, so
	// none of it took effect; the next Begin lands on a working host.
	ErrTxInterrupted = errors.New("pgfailover: transaction interrupted")

	// ErrCommitOutcomeUnknown means a COMMIT, or a statement outside a
	// transaction that may write, was in flight when its connection died
	// or the caller's context ended, and the server had neither answered
	// it nor provably refused it. It may or may not have taken effect;
	// pgfailover never runs it again and never reports it as a success.
	// After any other error the statement did not commit: the rule, and
	// where it holds, is
	// https://github.com/pgfailover/pgfailover/blob/main/docs/errors.md#the-rule.
	ErrCommitOutcomeUnknown = errors.New("pgfailover: commit outcome unknown")
)

// HostError is the outcome of one host: the error it gave when it was
// tried. Addr is host:port; it never contains credentials. Kind, when set,
// is the sentinel (ErrTxInterrupted, ErrCommitOutcomeUnknown) saying what
// the error means for the caller.
type HostError struct {
	Kind error
	Addr string
	Err  error
}

func (e *HostError) Error() string {
	if e.Kind != nil {
		return e.Kind.Error() + ": host " + e.Addr + ": " + e.Err.Error()
	}
	return e.Addr + ": " + e.Err.Error()
}

func (e *HostError) Unwrap() []error {
	if e.Kind != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Err}
}

// FailoverError reports a call that could not complete on any host. It wraps
// its kind (ErrNoHost or ErrBudgetExhausted), so errors.Is works on it, and
// every host's last outcome, so errors.As finds a *pgconn.PgError or a
// *HostError inside.
type FailoverError struct {
	Kind     error       // ErrNoHost or ErrBudgetExhausted
	Cause    error       // the caller's context error when that ended the walk, else nil
	Attempts int         // attempts that counted against failover_max_attempts
	Hosts    []HostError // last outcome of each host, those tried first in the order tried
}

func (e *FailoverError) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind.Error())
	if e.Cause != nil {
		b.WriteString(" (")
		b.WriteString(e.Cause.Error())
		b.WriteString(")")
	}
	for i, h := range e.Hosts {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(h.Error())
	}
	return b.String()
}

func (e *FailoverError) Unwrap() []error {
	errs := make([]error, 0, 2+len(e.Hosts))
	errs = append(errs, e.Kind)
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	for i := range e.Hosts {
		errs = append(errs, &e.Hosts[i])
	}
	return errs
}

// hostStateError describes a host a call did not try because the Pool knew
// it could not take the call.
type hostStateError struct{ state hosthealth.State }

func (e *hostStateError) Error() string {
	return "not tried: the host was " + e.state.String()
}

// errorKind is the sentinel for a verdict that names what a failure means
// for the caller, or nil.
func errorKind(v outcome.Verdict) error {
	switch v {
	case outcome.FailUnknown:
		return ErrCommitOutcomeUnknown
	case outcome.FailInterrupted:
		return ErrTxInterrupted
	}
	return nil
}
