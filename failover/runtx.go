package failover

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// RunTx runs fn in a transaction on pool and commits it. When the
// transaction is interrupted before COMMIT was sent (its connection died,
// so the server rolled it back), RunTx begins a new transaction on a
// working host and runs fn again, within the pool's failover budget
// (failover_max_attempts, failover_max_duration and ctx). It never runs fn
// again after COMMIT was sent: an unknown commit outcome is returned as an
// error wrapping ErrCommitOutcomeUnknown.
//
// fn may therefore run more than once. It must not have effects outside the
// database (sending mail, charging a card, writing to another system), nor
// carry state from one run to the next. When fn returns an error that is
// not an interruption, the transaction is rolled back and that error is
// returned.
func RunTx(ctx context.Context, pool *Pool, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	var (
		interruptions int
		started       time.Time
	)
	for {
		err := runTxOnce(ctx, pool, opts, fn)
		switch {
		case err == nil:
			if interruptions > 0 {
				pool.telemetry.survived(ctx)
			}
			return nil
		case !errors.Is(err, ErrTxInterrupted):
			if interruptions > 0 {
				pool.telemetry.failed(ctx)
			}
			return err
		}
		if interruptions == 0 {
			started = time.Now()
		}
		interruptions++
		if interruptions >= pool.cfg.MaxAttempts || time.Since(started) > pool.cfg.MaxDuration || ctx.Err() != nil {
			pool.telemetry.failed(ctx)
			return &FailoverError{Kind: ErrBudgetExhausted, Cause: ctx.Err(), Attempts: interruptions, Hosts: hostErrors(err)}
		}
		// BeginTx walks to a working host (and backs off) by itself.
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
