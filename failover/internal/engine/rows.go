package engine

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/internal/outcome"
)

// QueryRow sends a query expected to return at most one row, as
// Pool.QueryRow does: errors are deferred to Scan, which runs the query
// again elsewhere where sentRow.Scan says.
func (e *Engine) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	var c call
	e.startCall(&c, ctx)
	return sendRow(&c, sql, args)
}

// sendRow acquires a connection for c and sends the query there. The
// query, c copied with its arguments, waits for Scan in the connection's
// state (callState.row), which only the connection's holder touches; the
// Row handed out comes from that connection's slab (see rowSlab).
func sendRow(c *call, sql string, args []any) *sentRow {
	c.sql = sql
	conn, err := c.acquire()
	if err != nil {
		return &sentRow{err: err}
	}
	st := callStateOf(conn.Conn().PgConn())
	r := &st.row
	r.call = *c
	r.args = args
	r.sendOn(conn)
	h := st.slab.sentRow() // zero: never handed out before
	h.query = r
	return h
}

// sentRow is the pgx.Row that QueryRow returns. It is small, so that the
// garbage a QueryRow leaves is no larger than pgxpool's: the query itself
// waits in its connection's state until Scan, which takes it from there
// onto its own stack before anything gives the connection back.
type sentRow struct {
	query *row  // the query sent, until Scan; nil once scanned, or when it could not be sent
	err   error // why the query could not be sent, or Scan's outcome
}

// Scan reads the first row as pgx's QueryRow does (ErrNoRows when there is
// none, the rest discarded). A replay-safe read runs again elsewhere when
// its connection failed before the query completed, even after its row
// was scanned into dest: the row of the new execution is scanned into dest
// again, whole. Any other statement runs again only when it provably did
// not run.
func (s *sentRow) Scan(dest ...any) error {
	if s.query == nil {
		// Never sent, or scanned before: like pgx, the row is gone after
		// the first Scan.
		if s.err != nil {
			return s.err
		}
		return pgx.ErrNoRows
	}
	// The connection is held until r gives it back, and its next holder
	// may write its state at once: from here the query is r alone.
	r := *s.query
	*s.query = row{} // the connection's state keeps nothing of this call
	s.query = nil
	s.err = errScanPanicked // what a Scan after one that panics returns
	s.err = r.scan(dest)
	return s.err
}

// row is a QueryRow's query: what Scan needs to read its row, and to send
// it again to another host.
type row struct {
	args []any
	call call // its ctx and sql are the query's

	conn  *pgxpool.Conn // held from send until scan gives it back
	inner pgx.Rows
	err   error // why the query could not be sent again
}

// send acquires a connection from the next host and sends the query.
func (r *row) send() {
	conn, err := r.call.acquire()
	if err != nil {
		r.err = err
		return
	}
	r.sendOn(conn)
}

// sendOn sends the query on conn, which the row holds until Scan.
func (r *row) sendOn(conn *pgxpool.Conn) {
	var err error
	r.conn = conn
	if r.inner, err = conn.Query(r.call.ctx, r.call.sql, r.args...); err != nil {
		r.inner = errRows{err: err}
	}
}

// scan reads the row into dest, sending the query again where its rules
// allow (see sentRow.Scan), and returns the outcome.
func (r *row) scan(dest []any) error {
	for r.err == nil {
		got := r.inner.Next()
		var scanErr error
		if got {
			scanErr = r.scanOrRelease(dest)
		}
		r.inner.Close()
		err := explainRefusal(r.call.ctx, r.conn, r.inner.Err())
		r.conn.Release()
		r.conn = nil
		switch {
		case err == nil && !got:
			err = pgx.ErrNoRows
			r.err = r.call.done(nil, queryWrote(&r.call, r.call.ctx, r.call.sql))
		case err == nil:
			err = scanErr
			r.err = r.call.done(nil, queryWrote(&r.call, r.call.ctx, r.call.sql))
		case got && scanErr == nil:
			// The row reached dest and then the connection failed. A
			// replay-safe read runs again: its one row is scanned into
			// dest again, whole, so nothing of the two executions mixes.
			r.err = r.call.done(err, r.call.e.classes.queryPolicy(r.call.ctx, r.call.sql))
		case got:
			// The row could not be scanned; what failed after it is not
			// replayed.
			r.err = r.call.done(err, r.call.e.classes.queryPolicy(r.call.ctx, r.call.sql)&outcome.MayWrite)
		default:
			r.err = r.call.done(err, r.call.e.classes.queryPolicy(r.call.ctx, r.call.sql))
		}
		if r.err == errRetry {
			r.err = nil
			r.send()
			continue
		}
		if r.err == nil {
			r.err = err
		}
		return r.err
	}
	return r.err
}

// scanOrRelease scans the row into dest. When Scan panics (a typed nil
// in dest, say), the connection is given back before the panic goes on, as
// pgxpool does, so that Close does not wait for it forever: pgxpool
// destroys it, since its rows were not read to the end.
func (r *row) scanOrRelease(dest []any) error {
	panicked := true
	defer func() {
		if panicked {
			r.conn.Release()
			r.conn = nil
		}
	}()
	err := r.inner.Scan(dest...)
	panicked = false
	return err
}

// errScanPanicked is what Scan returns when called again after a Scan that
// panicked.
var errScanPanicked = errors.New("pgfailover: an earlier Scan of this row panicked")

// Query runs a query and returns its rows, as Pool.Query does: the query
// moves to another host only before its first row reaches the caller.
func (e *Engine) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	var c call
	e.startCall(&c, ctx)
	return startRows(&c, sql, args)
}

// startRows sends the query through c to the first host that accepts it.
// The rows that follow the call from then on come from the slab of the
// connection they were sent on (see rowSlab); c, which lives on the
// caller's stack, is copied into them.
func startRows(c *call, sql string, args []any) (pgx.Rows, error) {
	c.sql = sql
	var conn *pgxpool.Conn
	var inner pgx.Rows
	err := c.attempt(func(cn *pgxpool.Conn) (outcome.Rule, error) {
		var err error
		conn, inner, err = queryOn(cn, c.ctx, sql, args)
		if err != nil {
			return c.e.classes.queryPolicy(c.ctx, sql), err
		}
		return 0, errKeep // the policy of a success that goes on is not looked at
	})
	if err != nil {
		return errRows{err: err}, err
	}
	r := slabOf(conn).rows() // zero: never handed out before
	r.call = *c
	r.args = args
	r.conn, r.inner = conn, inner
	return r, nil
}

// queryOn sends the query on conn. On failure, it gives conn back and
// returns the error as a host's refusal means it (explainRefusal).
func queryOn(conn *pgxpool.Conn, ctx context.Context, sql string, args []any) (*pgxpool.Conn, pgx.Rows, error) {
	inner, err := conn.Query(ctx, sql, args...)
	if err != nil {
		err = explainRefusal(ctx, conn, err)
		conn.Release()
		return nil, nil, err
	}
	return conn, inner, nil
}

// rows follows one query across hosts until its first row is delivered.
type rows struct {
	args []any
	call call // its ctx and sql are the query's

	conn         *pgxpool.Conn // nil once released
	inner        pgx.Rows
	err          error // the final error, once settled
	rowDelivered bool  // a row has reached the caller
}

// start sends the query again, to the next host that accepts it: the
// last execution failed before its first row reached the caller.
func (r *rows) start() error {
	return r.call.attempt(func(conn *pgxpool.Conn) (outcome.Rule, error) {
		conn, inner, err := queryOn(conn, r.call.ctx, r.call.sql, r.args)
		if err != nil {
			return r.call.e.classes.queryPolicy(r.call.ctx, r.call.sql), err
		}
		r.conn, r.inner = conn, inner
		return 0, errKeep // the policy of a success that goes on is not looked at
	})
}

func (r *rows) Next() bool {
	for r.err == nil && r.conn != nil {
		if r.inner.Next() {
			r.rowDelivered = true
			return true
		}
		err := r.inner.Err()
		if err != nil {
			r.inner.Close()
			err = explainRefusal(r.call.ctx, r.conn, err)
		}
		r.release()
		err = r.call.done(err, r.rule(err))
		if err != errRetry {
			r.err = err
			return false
		}
		if err := r.start(); err != nil {
			r.err = err
		}
	}
	return false
}

// queryWrote is the policy of call c's query sql when it succeeded: its
// writes bit, which done reads, says whether it may have written. The
// classifier is asked only when that is recorded (call.recording).
func queryWrote(c *call, ctx context.Context, sql string) outcome.Rule {
	if !c.recording() {
		return 0
	}
	return c.e.classes.queryPolicy(ctx, sql) & outcome.MayWrite
}

// rule is what the query allows after err, given what reached the caller. On
// success it says whether the query may have written (queryWrote).
func (r *rows) rule(err error) outcome.Rule {
	if err == nil {
		return queryWrote(&r.call, r.call.ctx, r.call.sql)
	}
	p := r.call.e.classes.queryPolicy(r.call.ctx, r.call.sql)
	if r.rowDelivered {
		// Never replayed now; a write cut off is still of unknown outcome.
		p = p.Delivered()
	}
	return p
}

func (r *rows) release() {
	if r.conn != nil {
		r.inner.Close()
		r.conn.Release()
		r.conn = nil
	}
}

func (r *rows) Close() {
	if r.conn == nil {
		return
	}
	r.release()
	// Closing ends the query: whatever happened, it is not sent again.
	err := r.inner.Err()
	if err = r.call.done(err, r.rule(err).Delivered()); err != nil && r.err == nil {
		r.err = err
	}
}

func (r *rows) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.inner.Err()
}

func (r *rows) CommandTag() pgconn.CommandTag                { return r.inner.CommandTag() }
func (r *rows) FieldDescriptions() []pgconn.FieldDescription { return r.inner.FieldDescriptions() }
func (r *rows) RawValues() [][]byte                          { return r.inner.RawValues() }
func (r *rows) Conn() *pgx.Conn                              { return r.inner.Conn() }
func (r *rows) TypeMap() *pgtype.Map                         { return r.inner.TypeMap() }

func (r *rows) Scan(dest ...any) error {
	err := r.inner.Scan(dest...)
	if err != nil {
		r.Close()
	}
	return err
}

func (r *rows) Values() ([]any, error) {
	v, err := r.inner.Values()
	if err != nil {
		r.Close()
	}
	return v, err
}

// errRows is the Rows returned when a query could not start anywhere.
type errRows struct{ err error }

func (errRows) Close()                                       {}
func (e errRows) Err() error                                 { return e.err }
func (errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (errRows) Next() bool                                   { return false }
func (e errRows) Scan(...any) error                          { return e.err }
func (e errRows) Values() ([]any, error)                     { return nil, e.err }
func (errRows) RawValues() [][]byte                          { return nil }
func (errRows) Conn() *pgx.Conn                              { return nil }
func (errRows) TypeMap() *pgtype.Map                         { return nil }

// rowSlabSize is how many values of a kind a slab allocates at once, as
// many as pgx's own slab of rows per connection.
const rowSlabSize = 64

// rowSlab hands out the Row and Rows values of the calls whose first
// attempt ran on one connection, as pgxpool and pgx hand out theirs: they
// are allocated rowSlabSize at a time, and each is handed out once and
// never reused, so no two executions ever share one, and a caller may
// keep one (and call Scan, Err or CommandTag on it) for as long as it
// likes. Only the holder of the connection touches its slab, right after
// acquiring it; the pool's acquire and release order the holders. A slab
// stays in memory while any value of it does, and its rows values keep
// what they refer to (the context, the arguments) as pgx's own slab of
// rows does.
type rowSlab struct {
	sentFree []sentRow // not handed out yet
	rowsFree []rows    // not handed out yet
}

// slabOf returns the slab of conn, which is held.
func slabOf(conn *pgxpool.Conn) *rowSlab { return &callStateOf(conn.Conn().PgConn()).slab }

// callKey is where a connection's callState lives in pgconn's
// per-connection CustomData.
const callKey = "pgfailover.call"

// callState is what the Pool's calls keep on one connection: the slab
// its calls' Row and Rows values come from, and the query of the QueryRow
// it is held for, until its Scan.
type callState struct {
	slab rowSlab
	row  row
}

// callStateOf returns the callState of pc, made on first use.
func callStateOf(pc *pgconn.PgConn) *callState {
	cd := pc.CustomData()
	st, _ := cd[callKey].(*callState)
	if st == nil {
		st = new(callState)
		cd[callKey] = st
	}
	return st
}

// sentRow returns a sentRow never handed out before.
func (s *rowSlab) sentRow() *sentRow {
	if len(s.sentFree) == 0 {
		s.sentFree = make([]sentRow, rowSlabSize)
	}
	r := &s.sentFree[0]
	s.sentFree = s.sentFree[1:]
	return r
}

// rows returns a rows never handed out before.
func (s *rowSlab) rows() *rows {
	if len(s.rowsFree) == 0 {
		s.rowsFree = make([]rows, rowSlabSize)
	}
	r := &s.rowsFree[0]
	s.rowsFree = s.rowsFree[1:]
	return r
}
