package failover

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SendBatch sends a batch to the best host. The whole batch moves to another
// host while none of its results has been read, under the same rules as
// Exec: its first statement failed without running (nothing reached the
// server, or the server refused it). After a result has been read, errors
// are returned as they come. A batch that begins a transaction is pinned to
// its host like Begin.
func (p *Pool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	br := &batchResults{ctx: ctx, batch: b, call: p.newCall(ctx)}
	if err := br.send(); err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return br
}

type batchResults struct {
	ctx   context.Context
	batch *pgx.Batch
	call  call

	conn *pgxpool.Conn // nil once released or handed to the transaction
	cur  pgx.BatchResults
	tx   pgx.Tx
	read bool // a result has reached the caller
}

func (br *batchResults) send() error {
	conn, err := br.call.acquire()
	if err != nil {
		return err
	}
	br.conn, br.cur = conn, conn.SendBatch(br.ctx, br.batch)
	if tx := br.cur.Tx(); tx != nil {
		br.tx = &pinnedTx{Tx: tx, conn: conn}
		br.conn = nil
		br.read = true // a transaction is never moved
	}
	return nil
}

// settle decides what to do with the outcome of reading a result. It
// returns true when the batch was sent again and the read should be
// repeated on the new results.
func (br *batchResults) settle(err *error) bool {
	if *err == nil {
		if !br.read {
			br.read = true
			*err = br.call.done(nil, idempotent)
		}
		return false
	}
	rule := delivered
	if !br.read {
		rule = batchPolicy(br.ctx, br.batch)
	}
	br.read = true
	if br.conn == nil {
		*err = br.call.done(*err, delivered)
		return false
	}
	br.cur.Close()
	br.conn.Release()
	br.conn = nil
	if e := br.call.done(*err, rule); e != errRetry {
		*err = e
		return false
	}
	br.read = false
	if e := br.send(); e != nil {
		*err = e
		br.cur = pgx.FailedBatchResults(br.batch, e)
		return false
	}
	return true
}

func (br *batchResults) Exec() (pgconn.CommandTag, error) {
	for {
		tag, err := br.cur.Exec()
		if !br.settle(&err) {
			return tag, err
		}
	}
}

func (br *batchResults) Query() (pgx.Rows, error) {
	for {
		rows, err := br.cur.Query()
		if !br.settle(&err) {
			return rows, err
		}
	}
}

func (br *batchResults) QueryRow() pgx.Row { return batchRow{br} }

type batchRow struct{ br *batchResults }

func (r batchRow) Scan(dest ...any) error {
	for {
		err := r.br.cur.QueryRow().Scan(dest...)
		if err == pgx.ErrNoRows {
			r.br.read = true
			return err
		}
		if !r.br.settle(&err) {
			return err
		}
	}
}

func (br *batchResults) Close() error {
	err := br.cur.Close()
	if br.conn != nil {
		br.conn.Release()
		br.conn = nil
	}
	return err
}

func (br *batchResults) Tx() pgx.Tx { return br.tx }

// pinnedTx gives its connection back to its host's pool when the
// transaction ends.
type pinnedTx struct {
	pgx.Tx
	conn *pgxpool.Conn
}

func (t *pinnedTx) Commit(ctx context.Context) error {
	err := t.Tx.Commit(ctx)
	t.release()
	return err
}

func (t *pinnedTx) Rollback(ctx context.Context) error {
	err := t.Tx.Rollback(ctx)
	t.release()
	return err
}

func (t *pinnedTx) release() {
	if t.conn != nil {
		t.conn.Release()
		t.conn = nil
	}
}
