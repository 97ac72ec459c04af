package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/netconn"
	"github.com/pgfailover/pgfailover/internal/outcome"
)

// tx is a transaction pinned to one host. It is never moved: when its
// connection dies, its errors wrap ErrTxInterrupted, or
// ErrCommitOutcomeUnknown when COMMIT was in flight.
type tx struct {
	pgx.Tx
	e      *Engine
	host   *hostpool.Host
	epoch  hoststate.Epoch // host's epoch when the transaction's connection was picked (call.epoch)
	writes bool            // a read-write transaction: its commit may have changed data
	nested bool            // a savepoint: its "commit" is RELEASE SAVEPOINT

	// callerGaveUp is set once a statement failed because its context
	// ended; the connection is closed by the client from then on.
	callerGaveUp bool
	finished     bool // Commit or Rollback was called
}

// interrupted is what an error of a statement inside the transaction
// means for the caller (outcome.InTx).
func (t *tx) interrupted(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	return t.decide(ctx, outcome.InTx, err)
}

// decide hands err, the failure of a statement of the transaction in
// phase, sent with ctx, to outcome.Decide and applies the decision: it
// marks the host and names what the failure means. The caller's own
// deadline is not the host's fault. pgx closes the connection when a
// statement's context ends while it runs, so what fails after that is not
// the host's fault either; a context that had ended before anything was
// sent leaves the connection, and the transaction, as they were.
func (t *tx) decide(ctx context.Context, phase outcome.Phase, err error) error {
	callerDone := outcome.CallerDone(ctx)
	if callerDone && t.Tx.Conn().PgConn().IsClosed() {
		t.callerGaveUp = true
	}
	f, err := outcome.Describe(err, phase, outcome.WriteOnce, t.e.Target)
	f.CallerDone = callerDone || t.callerGaveUp
	d := outcome.Decide(f)
	if d.Mark {
		t.e.Hosts.MarkFailed(t.host, t.epoch, d.Meaning, err)
	}
	if kind := errorKind(d.Verdict); kind != nil {
		return t.hostError(kind, err)
	}
	return err
}

// hostError names the transaction's host in an error of the given kind.
func (t *tx) hostError(kind, err error) error {
	return &HostError{Kind: kind, Addr: t.host.Addr, Err: err}
}

func (t *tx) Commit(ctx context.Context) error {
	if t.finished {
		return t.Tx.Commit(ctx) // pgx.ErrTxClosed; the connection is no longer ours to look at
	}
	t.finished = true
	if t.nested {
		return t.interrupted(ctx, t.Tx.Commit(ctx))
	}
	if err := t.deadBeforeCommit(); err != nil {
		t.Tx.Rollback(ctx) // gives the broken connection back to be destroyed
		return t.decide(ctx, outcome.Commit, err)
	}
	err := t.Tx.Commit(ctx)
	if err == nil {
		if t.writes && t.e.recordsWrites(ctx) {
			t.e.wrote(ctx, t.host)
		}
		return nil
	}
	err = t.decide(ctx, outcome.Commit, err)
	if t.writes && errors.Is(err, ErrCommitOutcomeUnknown) {
		t.e.mayHaveWritten(ctx)
	}
	return err
}

// deadBeforeCommit reports why the transaction is certainly gone before
// COMMIT is sent, or nil. The connection may have been closed by pgx (a
// statement's context ended, or an earlier statement found it broken) or
// by the server while the transaction sat idle; either way the server rolls
// the transaction back, and sending COMMIT would only make its outcome look
// uncertain. The error says that COMMIT did not run.
func (t *tx) deadBeforeCommit() error {
	pc := t.Tx.Conn().PgConn()
	if pc.IsClosed() {
		// Whatever closed it was decided on then: the cause is no news of
		// the host (hosthealth.NotFailover).
		return &outcome.NotSentError{Err: errConnClosedBeforeCommit}
	}
	if err := t.diedIdle(); err != nil {
		return &outcome.NotSentError{Err: err}
	}
	return nil
}

// diedIdle reports, before COMMIT is sent, whether the connection was
// already dead: the server closed it (or sent its last words) while the
// transaction sat idle. Then the transaction is certainly rolled back, and
// sending COMMIT would only make its outcome look uncertain. The check is a
// non-blocking peek; only when something is waiting does it read it.
func (t *tx) diedIdle() error {
	pc := t.Tx.Conn().PgConn()
	switch hostpool.StateOf(pc).Peek.Peek() {
	case netconn.PeekClosed:
		return errConnClosedIdle
	case netconn.PeekPending:
		// Something is waiting: read that one message. A FATAL (the server
		// ended the session) comes back as an error and closes the
		// connection; a notice or a parameter status leaves it open. The
		// message is already there, so the read does not wait; the bound
		// only matters for a message cut short, which a dead server would
		// never finish. (CheckConn reads for at most 1 ms, which a busy
		// machine can let pass before the read even starts.)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := pc.ReceiveMessage(ctx)
		return err
	}
	return nil
}

// Causes given when a transaction's connection was found dead before
// COMMIT.
var (
	errConnClosedIdle         = fmt.Errorf("connection closed by the server while the transaction was idle: %w", io.EOF)
	errConnClosedBeforeCommit = errors.New("connection closed before COMMIT was sent")
)

func (t *tx) Rollback(ctx context.Context) error {
	t.finished = true
	return t.interrupted(ctx, t.Tx.Rollback(ctx))
}

func (t *tx) Begin(ctx context.Context) (pgx.Tx, error) {
	inner, err := t.Tx.Begin(ctx)
	if err != nil {
		return nil, t.interrupted(ctx, err)
	}
	return &tx{Tx: inner, e: t.e, host: t.host, epoch: t.epoch, nested: true, writes: t.writes}, nil
}

func (t *tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := t.Tx.Exec(ctx, sql, args...)
	return tag, t.interrupted(ctx, err)
}

func (t *tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := t.Tx.Query(ctx, sql, args...)
	if err != nil {
		return rows, t.interrupted(ctx, err)
	}
	return &txRows{Rows: rows, t: t, ctx: ctx}, nil
}

func (t *tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return txRow{row: t.Tx.QueryRow(ctx, sql, args...), t: t, ctx: ctx}
}

func (t *tx) CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error) {
	n, err := t.Tx.CopyFrom(ctx, tableName, columnNames, rowSrc)
	return n, t.interrupted(ctx, err)
}

func (t *tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return &txBatch{BatchResults: t.Tx.SendBatch(ctx, b), t: t, ctx: ctx}
}

func (t *tx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	sd, err := t.Tx.Prepare(ctx, name, sql)
	return sd, t.interrupted(ctx, err)
}

// txRows, txRow and txBatch keep the context their statements were sent
// with: a failure read later is decided with it (tx.decide).
type txRows struct {
	pgx.Rows
	t   *tx
	ctx context.Context
}

func (r *txRows) Err() error { return r.t.interrupted(r.ctx, r.Rows.Err()) }

type txRow struct {
	row pgx.Row
	t   *tx
	ctx context.Context
}

func (r txRow) Scan(dest ...any) error { return r.t.interrupted(r.ctx, r.row.Scan(dest...)) }

type txBatch struct {
	pgx.BatchResults
	t   *tx
	ctx context.Context
}

func (b *txBatch) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, b.t.interrupted(b.ctx, err)
}

func (b *txBatch) Query() (pgx.Rows, error) {
	rows, err := b.BatchResults.Query()
	if err != nil {
		return rows, b.t.interrupted(b.ctx, err)
	}
	return &txRows{Rows: rows, t: b.t, ctx: b.ctx}, nil
}

func (b *txBatch) QueryRow() pgx.Row {
	return txRow{row: b.BatchResults.QueryRow(), t: b.t, ctx: b.ctx}
}

func (b *txBatch) Close() error { return b.t.interrupted(b.ctx, b.BatchResults.Close()) }
