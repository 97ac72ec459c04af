package engine

import (
	"errors"
	"strings"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/outcome"
	"github.com/pgfailover/pgfailover/internal/telemetry"
)

// The sentinel errors of a call's failover decisions. Package failover
// declares each under the same name and documents what it means.
var (
	ErrNoHost               = errors.New("pgfailover: no host satisfies the target")
	ErrBudgetExhausted      = errors.New("pgfailover: failover budget exhausted")
	ErrClosed               = errors.New("pgfailover: pool closed")
	ErrTxInterrupted        = errors.New("pgfailover: transaction interrupted")
	ErrCommitOutcomeUnknown = errors.New("pgfailover: commit outcome unknown")
)

// HostError is the outcome of one host: the error it gave when it was
// tried (failover.HostError). Kind, when set, is the sentinel saying what
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

// FailoverError reports a call that could not complete on any host
// (failover.FailoverError).
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

// ReplicaLagError says why a replica was passed over: its staleness bound
// was unknown, or above max_lag (failover.ReplicaLagError).
type ReplicaLagError struct {
	Addr   string
	Known  bool          // false: never probed, its probe failed, or nothing replayed yet
	Bound  time.Duration // the staleness bound when Known
	MaxLag time.Duration
}

func (e *ReplicaLagError) Error() string {
	if !e.Known {
		return "replica " + e.Addr + ": staleness unknown, max_lag " + e.MaxLag.String()
	}
	return "replica " + e.Addr + ": stale by up to " + e.Bound.Round(time.Millisecond).String() + ", max_lag " + e.MaxLag.String()
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

// callOutcome names how a call that met a failover event ended: a value of
// pgfailover.outcome.
func callOutcome(err error) telemetry.CallOutcome {
	switch {
	case err == nil:
		return telemetry.OutcomeSurvived
	case errors.Is(err, ErrCommitOutcomeUnknown):
		return telemetry.OutcomeCommitOutcomeUnknown
	case errors.Is(err, ErrNoHost):
		return telemetry.OutcomeNoHost
	case errors.Is(err, ErrBudgetExhausted):
		return telemetry.OutcomeBudgetExhausted
	}
	return telemetry.OutcomeFailed
}
