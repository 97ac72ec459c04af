package failover

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

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

// RunTx runs fn in a transaction on pool and commits it. When the
// transaction is interrupted before COMMIT was sent (its connection died,
// so the server rolled it back), RunTx waits the Pool's backoff
// (failover_backoff_initial to failover_backoff_max, full jitter, as
// between a call's attempts), begins a new transaction on a working host
// and runs fn again, within the pool's failover budget
// (failover_max_attempts interruptions, failover_max_duration from the
// first one, and ctx). It never runs fn again after COMMIT was sent: an
// unknown commit outcome is returned as an error wrapping
// ErrCommitOutcomeUnknown.
//
// fn may therefore run more than once. It must not have effects outside the
// database (sending mail, charging a card, writing to another system), nor
// carry state from one run to the next. When fn returns an error that is
// not an interruption, the transaction is rolled back and that error is
// returned.
func RunTx(ctx context.Context, pool *Pool, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	state := &runTxState{}
	inner := context.WithValue(ctx, insideRunTx{}, state)
	var (
		interruptions int
		first         time.Time // of the first interruption
		waits         *backoff.Waits
	)
	for {
		err := runTxOnce(inner, pool, opts, fn)
		switch {
		case err == nil:
			if interruptions > 0 || state.failedOver {
				pool.telemetry.Counted(ctx, telemetry.OutcomeSurvived)
			}
			return nil
		case !errors.Is(err, ErrTxInterrupted) || outcome.CallerDone(ctx):
			if interruptions > 0 || state.failedOver {
				pool.telemetry.Counted(ctx, callOutcome(err))
			}
			return err
		}
		if interruptions == 0 {
			first, waits = pool.clock.Now(), pool.backoffPolicy().Start()
		}
		interruptions++
		// The budget is checked before each new run, never during one: a
		// run that has started keeps the caller's own context.
		if interruptions >= pool.cfg.MaxAttempts || pool.clock.Now().Sub(first) >= pool.cfg.MaxDuration {
			fe := &FailoverError{Kind: ErrBudgetExhausted, Attempts: interruptions, Hosts: hostErrors(err)}
			pool.telemetry.Counted(ctx, callOutcome(fe))
			return fe
		}
		switch waits.Wait(ctx, pool.life.Done()) {
		case nil:
		case backoff.ErrStopped:
			return ErrClosed
		default:
			// The caller gave up during the wait: its context's error, as
			// when it ends before BEGIN.
			pool.telemetry.Counted(ctx, callOutcome(ctx.Err()))
			return ctx.Err()
		}
	}
}

func runTxOnce(ctx context.Context, pool *Pool, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	tx, err := pool.BeginTx(ctx, opts)
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
