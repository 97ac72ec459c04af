package failover

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/sockpeek"
)

// tx is a transaction pinned to one host. It is never moved: when its
// connection dies, its errors wrap ErrTxInterrupted, or
// ErrCommitOutcomeUnknown when COMMIT was in flight.
type tx struct {
	pgx.Tx
	p      *Pool
	host   int
	nested bool // a savepoint: its "commit" is RELEASE SAVEPOINT

	// callerGaveUp is set once a statement failed because its context
	// ended; the connection is closed by the client from then on.
	callerGaveUp bool
}

// interrupted maps an error of a statement inside the transaction.
func (t *tx) interrupted(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		// The caller's own deadline: not the host's fault. pgx closes the
		// connection when a statement's context ends, so what fails after
		// it is not the host's fault either.
		t.callerGaveUp = true
	}
	if t.callerGaveUp {
		return err
	}
	class := hosthealth.Classify(err)
	switch class {
	case hosthealth.NotFailover, hosthealth.Terminal:
		return err
	}
	t.p.markFailed(t.host, class)
	if class != hosthealth.Transport {
		// The server refused the statement (a standby refusing a write):
		// the transaction is aborted but its connection is alive.
		return err
	}
	return &HostError{Kind: ErrTxInterrupted, Addr: t.p.hosts[t.host].addr, Err: err}
}

func (t *tx) Commit(ctx context.Context) error {
	if !t.nested {
		if dead := t.diedIdle(ctx); dead != nil {
			t.Tx.Rollback(ctx) // gives the broken connection back to be destroyed
			t.p.markFailed(t.host, hosthealth.Transport)
			return &HostError{Kind: ErrTxInterrupted, Addr: t.p.hosts[t.host].addr, Err: dead}
		}
	}
	err := t.Tx.Commit(ctx)
	if err == nil || t.nested || provablyUnrun(err) {
		return t.interrupted(err)
	}
	if class := hosthealth.Classify(err); class == hosthealth.Transport || ctx.Err() != nil {
		t.p.markFailed(t.host, class)
		return &HostError{Kind: ErrCommitOutcomeUnknown, Addr: t.p.hosts[t.host].addr, Err: err}
	}
	return err
}

// diedIdle reports, before COMMIT is sent, whether the connection was
// already dead: the server closed it (or sent its last words) while the
// transaction sat idle. Then the transaction is certainly rolled back, and
// sending COMMIT would only make its outcome look uncertain. The check is a
// non-blocking peek; only when something is waiting does it read it.
func (t *tx) diedIdle(ctx context.Context) error {
	pc := t.Tx.Conn().PgConn()
	pk, _ := pc.CustomData()[peekKey].(*sockpeek.Peeker)
	switch pk.Peek() {
	case sockpeek.Closed:
		return errConnClosedIdle
	case sockpeek.Pending:
		return pc.CheckConn()
	}
	return nil
}

// errConnClosedIdle is the cause given when a transaction's connection was
// found closed before COMMIT.
var errConnClosedIdle = errors.New("connection closed by the server while the transaction was idle")

func (t *tx) Rollback(ctx context.Context) error { return t.interrupted(t.Tx.Rollback(ctx)) }

func (t *tx) Begin(ctx context.Context) (pgx.Tx, error) {
	inner, err := t.Tx.Begin(ctx)
	if err != nil {
		return nil, t.interrupted(err)
	}
	return &tx{Tx: inner, p: t.p, host: t.host, nested: true}, nil
}

func (t *tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := t.Tx.Exec(ctx, sql, args...)
	return tag, t.interrupted(err)
}

func (t *tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := t.Tx.Query(ctx, sql, args...)
	if err != nil {
		return rows, t.interrupted(err)
	}
	return &txRows{Rows: rows, t: t}, nil
}

func (t *tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return txRow{row: t.Tx.QueryRow(ctx, sql, args...), t: t}
}

func (t *tx) CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error) {
	n, err := t.Tx.CopyFrom(ctx, tableName, columnNames, rowSrc)
	return n, t.interrupted(err)
}

func (t *tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return &txBatch{BatchResults: t.Tx.SendBatch(ctx, b), t: t}
}

func (t *tx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	sd, err := t.Tx.Prepare(ctx, name, sql)
	return sd, t.interrupted(err)
}

type txRows struct {
	pgx.Rows
	t *tx
}

func (r *txRows) Err() error { return r.t.interrupted(r.Rows.Err()) }

type txRow struct {
	row pgx.Row
	t   *tx
}

func (r txRow) Scan(dest ...any) error { return r.t.interrupted(r.row.Scan(dest...)) }

type txBatch struct {
	pgx.BatchResults
	t *tx
}

func (b *txBatch) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, b.t.interrupted(err)
}

func (b *txBatch) Query() (pgx.Rows, error) {
	rows, err := b.BatchResults.Query()
	if err != nil {
		return rows, b.t.interrupted(err)
	}
	return &txRows{Rows: rows, t: b.t}, nil
}

func (b *txBatch) QueryRow() pgx.Row { return txRow{row: b.BatchResults.QueryRow(), t: b.t} }

func (b *txBatch) Close() error { return b.t.interrupted(b.BatchResults.Close()) }
