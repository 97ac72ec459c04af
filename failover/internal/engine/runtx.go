package engine

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/backoff"
	"github.com/pgfailover/pgfailover/internal/outcome"
	"github.com/pgfailover/pgfailover/internal/telemetry"
)

// insideRunTx is the context key under which RunTx hands its calls a
// *runTxState, so that the failover counters count the transaction
// function once, not each BEGIN inside it.
type insideRunTx struct{}

// runTxState collects what the calls inside one RunTx saw.
type runTxState struct {
	failedOver bool // some call inside met a failover event
}

// RunTx runs fn in a transaction and commits it, running it again on a
// working host after an interruption before COMMIT was sent, within the
// Pool's failover budget (failover.RunTx).
func (e *Engine) RunTx(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	state := &runTxState{}
	inner := context.WithValue(ctx, insideRunTx{}, state)
	var (
		interruptions int
		first         time.Time // of the first interruption
		waits         *backoff.Waits
	)
	for {
		err := e.runTxOnce(inner, opts, fn)
		switch {
		case err == nil:
			if interruptions > 0 || state.failedOver {
				e.Telemetry.Counted(ctx, telemetry.OutcomeSurvived)
			}
			return nil
		case !errors.Is(err, ErrTxInterrupted):
			if interruptions > 0 || state.failedOver {
				e.Telemetry.Counted(ctx, callOutcome(err))
			}
			return err
		}
		if interruptions == 0 {
			first, waits = e.Clock.Now(), e.BackoffPolicy().Start()
		}
		// The whole transaction was an attempt that provably did nothing:
		// it runs again as a replayable call's attempt would. The budget
		// is checked before each new run, never during one: a run that has
		// started keeps the caller's own context.
		f := outcome.Failure{Phase: outcome.Call, Class: hosthealth.Transport, Rule: outcome.Idempotent, DidNotRun: true,
			CallerDone: outcome.CallerDone(ctx), FailedOver: interruptions > 0, Attempts: interruptions,
			MaxAttempts: e.MaxAttempts, TimeLeft: e.Clock.Now().Sub(first) < e.MaxDuration}
		interruptions++
		switch outcome.Decide(f).Verdict {
		case outcome.TryNext:
		case outcome.FailBudget:
			fe := &FailoverError{Kind: ErrBudgetExhausted, Attempts: interruptions, Hosts: hostErrors(err)}
			if f.CallerDone {
				fe.Cause = ctx.Err()
			}
			e.Telemetry.Counted(ctx, callOutcome(fe))
			return fe
		default: // the caller gave up at the first interruption
			if state.failedOver {
				e.Telemetry.Counted(ctx, callOutcome(err))
			}
			return err
		}
		switch waits.Wait(ctx, e.Life.Done()) {
		case nil:
		case backoff.ErrStopped:
			return ErrClosed
		default:
			// The caller gave up during the wait: its context's error, as
			// when it ends before BEGIN.
			e.Telemetry.Counted(ctx, callOutcome(ctx.Err()))
			return ctx.Err()
		}
	}
}

func (e *Engine) runTxOnce(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	tx, err := e.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback(ctx) // fn's error says more than the rollback's
		return err
	}
	return tx.Commit(ctx)
}

// hostErrors lists the *HostError in err, if any.
func hostErrors(err error) []HostError {
	var he *HostError
	if errors.As(err, &he) {
		return []HostError{*he}
	}
	return nil
}
