package engine

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/internal/outcome"
)

// SendBatch sends a batch to the best host, as Pool.SendBatch does: the
// whole batch moves to another host, under the rules of Query, only while
// none of its results has been read.
func (e *Engine) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	br := &batchResults{ctx: ctx, batch: b, queued: snapshot(b)}
	e.startCall(&br.call, ctx)
	if err := br.send(); err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return br
}

// snapshot returns the queries of b as the caller queued them, from which
// a batch sent again on another host is built afresh (rebuilt). pgx
// changes a batch as it sends it: it ties statement descriptions to the
// connection, which rebuilt leaves behind, and it replaces the SQL and
// arguments of a query whose first argument is a pgx.QueryRewriter
// (pgx.NamedArgs) by the rewritten ones. Only then are the queries
// copied; otherwise b's own serve, and nothing is allocated.
func snapshot(b *pgx.Batch) []*pgx.QueuedQuery {
	if !slices.ContainsFunc(b.QueuedQueries, rewritten) {
		return b.QueuedQueries
	}
	qs := make([]pgx.QueuedQuery, len(b.QueuedQueries))
	ptrs := make([]*pgx.QueuedQuery, len(qs))
	for i, q := range b.QueuedQueries {
		qs[i] = pgx.QueuedQuery{SQL: q.SQL, Arguments: q.Arguments, Fn: q.Fn}
		ptrs[i] = &qs[i]
	}
	return ptrs
}

// rewritten reports whether pgx rewrites q as it sends it.
func rewritten(q *pgx.QueuedQuery) bool {
	if len(q.Arguments) == 0 {
		return false
	}
	_, ok := q.Arguments[0].(pgx.QueryRewriter)
	return ok
}

// rebuilt returns the batch rebuilt from its snapshot, for another attempt.
func (br *batchResults) rebuilt() *pgx.Batch {
	b := &pgx.Batch{}
	for _, q := range br.queued {
		b.Queue(q.SQL, q.Arguments...).Fn = q.Fn
	}
	return b
}

type batchResults struct {
	ctx    context.Context
	batch  *pgx.Batch         // what the current attempt sent
	queued []*pgx.QueuedQuery // the batch as queued, for another attempt (snapshot)
	call   call

	conn *pgxpool.Conn // nil once released or owned by the transaction
	cur  pgx.BatchResults
	tx   *tx
	read bool // a result has reached the caller
}

func (br *batchResults) send() error {
	conn, err := br.call.acquire()
	if err != nil {
		return err
	}
	br.conn, br.cur = conn, conn.SendBatch(br.ctx, br.batch)
	if t := br.cur.Tx(); t != nil {
		br.tx = &tx{Tx: &pinnedTx{Tx: t, conn: conn}, e: br.call.e, host: br.call.host, epoch: br.call.epoch, writes: true}
		br.conn = nil
		br.read = true // a transaction is never moved
		br.call.done(nil, outcome.Idempotent)
	}
	return nil
}

// rule is what the batch allows, given what reached the caller.
func (br *batchResults) rule() outcome.Rule {
	p := br.call.e.classes.batchPolicy(br.ctx, br.batch)
	if br.read {
		p = p.Delivered()
	}
	return p
}

// settle decides what to do with the outcome of reading a result. It
// returns true when the batch was sent again and the read should be
// repeated on the new results.
func (br *batchResults) settle(err *error) bool {
	if br.tx != nil {
		*err = br.tx.interrupted(br.ctx, *err)
		return false
	}
	if *err == nil {
		// The batch is settled as a success when it is closed.
		br.read = true
		return false
	}
	rule := br.rule()
	if f, _ := outcome.Describe(*err, outcome.Call, rule, br.call.picker.target); !outcome.CallerDone(br.ctx) && outcome.Decide(f).Verdict == outcome.PassThrough {
		// An ordinary error of one statement (a constraint, a scan): pgx
		// goes on with the next result, and so does the batch, which is
		// settled when it is closed.
		br.read = true
		return false
	}
	br.read = true
	if br.conn == nil {
		*err = br.call.done(*err, rule.Delivered())
		return false
	}
	br.cur.Close()
	*err = explainRefusal(br.ctx, br.conn, *err)
	br.conn.Release()
	br.conn = nil
	e := br.call.done(*err, rule)
	if e != errRetry {
		*err = e
		br.cur = pgx.FailedBatchResults(br.batch, e)
		return false
	}
	br.read = false
	br.batch = br.rebuilt()
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
			if err != nil {
				return rows, err
			}
			return &batchRows{Rows: rows, br: br}, nil
		}
	}
}

func (br *batchResults) QueryRow() pgx.Row { return batchRow{br} }

type batchRow struct{ br *batchResults }

func (r batchRow) Scan(dest ...any) error {
	for {
		err := r.br.cur.QueryRow().Scan(dest...)
		if err == pgx.ErrNoRows {
			// The query ran; it just found no row.
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
	if br.tx != nil {
		return br.tx.interrupted(br.ctx, err)
	}
	if br.conn != nil {
		br.conn.Release()
		br.conn = nil
		// Closing never sends the batch again.
		if err != nil {
			return br.call.done(err, br.rule().Delivered())
		}
		if !br.call.recording() {
			return br.call.done(nil, 0)
		}
		return br.call.done(nil, br.call.e.classes.batchPolicy(br.ctx, br.batch)&outcome.MayWrite)
	}
	return err
}

func (br *batchResults) Tx() pgx.Tx {
	if br.tx == nil {
		return nil
	}
	return br.tx
}

// batchRows maps the error of a batch's query rows like the batch's own.
type batchRows struct {
	pgx.Rows
	br     *batchResults
	mapped bool
	err    error
}

func (r *batchRows) Err() error {
	if !r.mapped {
		if err := r.Rows.Err(); err != nil {
			r.mapped = true
			r.err = err
			r.br.settle(&r.err)
		}
	}
	if r.mapped {
		return r.err
	}
	return nil
}

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
