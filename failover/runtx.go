package failover

import (
	"context"

	"github.com/jackc/pgx/v5"
)

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
	return pool.eng.RunTx(ctx, opts, fn)
}
