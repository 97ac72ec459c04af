package stdlib

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	pgxstdlib "github.com/jackc/pgx/v5/stdlib"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/outcome"
	"github.com/pgfailover/pgfailover/internal/sqlclass"
)

// Conn is the driver connection database/sql holds: pgx's stdlib
// connection with the Pool's statement-level semantics on top. A statement
// cut off after it was sent comes back wrapping
// failover.ErrCommitOutcomeUnknown (or, inside a transaction,
// failover.ErrTxInterrupted), never as driver.ErrBadConn, and a connection
// to a host that died or was demoted is retired before database/sql uses
// it again.
//
// It is what (*sql.Conn).Raw hands its function, under the same
// name as pgx's, so that code written for pgx's stdlib works after the
// import path alone is changed:
//
//	err := sqlConn.Raw(func(dc any) error {
//		pc := dc.(*stdlib.Conn).Conn()
//		_, err := pc.CopyFrom(ctx, pgx.Identifier{"t"}, cols, src)
//		return err
//	})
//
// Conn is made by the driver only; its zero value is not usable.
type Conn struct {
	// Embedding keeps every optional interface pgx's connection
	// implements (Pinger, NamedValueChecker, ConnPrepareContext); the
	// methods below are the ones whose errors or checks change. The field
	// is named pgxConn, not Conn, so that the method Conn is not hidden by
	// a field of that name.
	*pgxConn
	// usable is the primary-following pgxpool's PrepareConn: the peek, the
	// role and the host's state, without I/O beyond one peek syscall.
	usable func(context.Context, *pgx.Conn) (bool, error)
	target hosthealth.Target // the Pool's
	// owner is the connector of sql.Open's DB, which counts its
	// connections so that its Close need not wait for them; nil for
	// OpenDB's.
	owner *dsnConnector
	// rows is what QueryContext returns, set again by each query that
	// succeeds, so that a query allocates no wrapper of its own. A query
	// succeeds only once pgx has closed the last one's result (pgx answers
	// "conn busy" before that), and database/sql closes its Rows when pgx's
	// are done and touches a closed one no more.
	rows rows
}

// pgxConn is pgx's stdlib connection, under a name of its own for the
// embedded field (see Conn).
type pgxConn = pgxstdlib.Conn

var _ interface {
	driver.Conn
	driver.ExecerContext
	driver.QueryerContext
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.Pinger
	driver.NamedValueChecker
	driver.SessionResetter
	driver.Validator
} = (*Conn)(nil)

// Conn returns the *pgx.Conn under the connection, for what only pgx does
// (COPY, LISTEN, pgx's own types) inside (*sql.Conn).Raw. What
// runs on the *pgx.Conn is pgx's alone: no failover meaning is given to
// its errors, and nothing on it is retried.
func (c *Conn) Conn() *pgx.Conn { return c.pgxConn.Conn() }

// Close gives the connection back to its pgxpool.
func (c *Conn) Close() error {
	err := c.pgxConn.Close()
	if c.owner != nil {
		c.owner.release()
	}
	return err
}

// ended reports whether sql.Open's DB was closed while the connection was
// held: its statements then fail with failover.ErrClosed (the Pool is
// closing), and only cleanup (Rollback, closing rows and statements, Close)
// still runs.
func (c *Conn) ended() bool { return c.owner != nil && c.owner.closing.Load() }

// Ping checks the connection as pgx's does.
func (c *Conn) Ping(ctx context.Context) error {
	if c.ended() {
		return failover.ErrClosed
	}
	return c.pgxConn.Ping(ctx)
}

// ExecContext runs query and names what a failure means for the caller.
func (c *Conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.ended() {
		return nil, failover.ErrClosed
	}
	at := c.state()
	res, err := c.pgxConn.ExecContext(ctx, query, args)
	return res, c.meaning(ctx, query, at, err)
}

// QueryContext runs query; a failure before its first row, or while its
// rows are read, is named as for ExecContext.
func (c *Conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.ended() {
		return nil, failover.ErrClosed
	}
	at := c.state()
	r, err := c.pgxConn.QueryContext(ctx, query, args)
	if err != nil {
		return nil, c.meaning(ctx, query, at, err)
	}
	c.rows = rows{Rows: r.(*pgxstdlib.Rows), c: c, ctx: ctx, query: query, at: at}
	return &c.rows, nil
}

// Prepare is PrepareContext without a context.
func (c *Conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// PrepareContext returns a statement whose Exec and Query go through c,
// so that they get the same meaning. pgx runs a statement prepared under
// its own text when given that text again.
func (c *Conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if c.ended() {
		return nil, failover.ErrClosed
	}
	s, err := c.pgxConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &stmt{Stmt: s.(*pgxstdlib.Stmt), c: c, query: query}, nil
}

// Begin is BeginTx with the default options and no context.
func (c *Conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx begins a transaction whose Commit reports an unknown outcome
// when the connection is cut with COMMIT in flight.
//
// A BEGIN that lost its connection (a server that terminated the session
// or shut down after the connection passed its checks answers it with
// FATAL 57P01, or the socket breaks) returns driver.ErrBadConn, wrapping
// pgx's error: nothing of the caller's ran, so database/sql begins again
// on another connection, which goes to the new primary. The caller's
// context ending is returned as is, and so is an error the server answered
// BEGIN with on a connection that stays open.
func (c *Conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.ended() {
		return nil, failover.ErrClosed
	}
	t, err := c.pgxConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, c.beginFailed(ctx, err)
	}
	return &tx{Tx: t, c: c, ctx: ctx}, nil
}

// beginFailed names a failed BEGIN for database/sql: driver.ErrBadConn,
// which makes it begin again on another connection, when the connection
// is gone and outcome.Decide would send BEGIN, a statement that changes
// nothing, to another host; else err as is. pgx's own driver.ErrBadConn
// (nothing was sent) passes through.
func (c *Conn) beginFailed(ctx context.Context, err error) error {
	if errors.Is(err, driver.ErrBadConn) || !c.closed() {
		return err
	}
	f, _ := outcome.Describe(err, outcome.Call, outcome.Idempotent, c.target)
	f.CallerDone = outcome.CallerDone(ctx)
	f.MaxAttempts, f.TimeLeft = 2, true
	if outcome.Decide(f).Verdict != outcome.TryNext {
		return err
	}
	return fmt.Errorf("%w: BEGIN lost its connection: %w", driver.ErrBadConn, err)
}

// ResetSession runs pgx's checks (closed, open transaction, a ping after a
// second idle) and then the Pool's: database/sql takes another connection,
// having sent nothing on this one, when it returns driver.ErrBadConn.
func (c *Conn) ResetSession(ctx context.Context) error {
	if c.ended() {
		return driver.ErrBadConn
	}
	if err := c.pgxConn.ResetSession(ctx); err != nil {
		return err
	}
	if ok, err := c.usable(ctx, c.Conn()); !ok || err != nil {
		return driver.ErrBadConn
	}
	return nil
}

// IsValid tells database/sql, when a connection comes back from a call,
// whether to keep it: not when it was closed (a cut, a FATAL), nor when its
// server reported a role the Pool's target refuses (in_hot_standby, which
// a promoted or demoted server reports in answer to the next statement).
// database/sql then closes it, which gives it back to the pgxpool to be
// destroyed. It costs no system call: database/sql calls it after every
// statement, and the peek runs before the connection is used again
// (ResetSession, or pgxpool's own check).
func (c *Conn) IsValid() bool {
	pc := c.Conn().PgConn()
	if pc.IsClosed() || c.ended() {
		return false
	}
	role := hosthealth.ReportedRole(pc.ParameterStatus("in_hot_standby"))
	return role == hosthealth.RoleUnknown || c.target.Accepts(role)
}

// before is the state of a connection when a statement was handed to pgx.
type before struct {
	open bool // pgx had not closed the connection
	inTx bool // a transaction was open (begun by BeginTx or by the SQL)
}

func (c *Conn) state() before {
	pc := c.Conn().PgConn()
	return before{open: !pc.IsClosed(), inTx: pc.TxStatus() != 'I'}
}

// meaning turns err, the failure of query on c, into what the Pool would
// return for it; at is the connection's state before query was sent.
// driver.ErrBadConn, when nothing was sent, and anything the server
// answered, pass through unchanged.
func (c *Conn) meaning(ctx context.Context, query string, at before, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, driver.ErrBadConn) {
		if !at.open || !c.closed() {
			// Closed before the call, or a context that had ended, or a
			// busy connection: nothing was sent.
			return err
		}
		// pgx's stdlib returns driver.ErrBadConn for every error pgconn
		// calls safe to retry. Up to pgx v5.12 that included the "conn
		// closed" of a connection that broke while the answer to a
		// statement already sent was being read (measured: an INSERT cut
		// by an immediate shutdown or by pg_terminate_backend); v5.13 no
		// longer marks it so. The rule here does not rest on that
		// marking: an open connection that pgx closed during the call may
		// have sent the statement, which may have run.
		err = errLostInFlight
	}
	phase, rule := statementPhase(at.inTx, query)
	return c.decide(phase, rule, outcome.CallerDone(ctx), err)
}

// errLostInFlight stands for the error pgx's stdlib turned into
// driver.ErrBadConn; it must not wrap driver.ErrBadConn, or database/sql
// would run the statement again.
var errLostInFlight = fmt.Errorf("the connection closed with the statement in flight: %w", pgconn.ErrConnClosed)

// addr names c's host for errors (never credentials): its host:port, as
// the Pool's errors, logs and metrics name it, or, for a connection the
// Pool did not open to one of its hosts, the remote address of its
// socket. It is computed only when an error needs it. A closed
// connection keeps its address.
func (c *Conn) addr() string {
	if h := hostpool.StateOf(c.Conn().PgConn()).Host; h != nil {
		return h.Addr
	}
	if nc := c.Conn().PgConn().Conn(); nc != nil {
		if a := nc.RemoteAddr(); a != nil {
			return a.String()
		}
	}
	return ""
}

// closed reports whether pgx has closed c's connection.
func (c *Conn) closed() bool { return c.Conn().IsClosed() }

// statementPhase is where a statement failed, for outcome.Decide: inside
// a transaction (a transaction control statement sent as SQL counts as
// COMMIT), or on its own. The SQL is lexed only here, after a failure.
func statementPhase(inTx bool, query string) (outcome.Phase, outcome.Rule) {
	switch {
	case inTx && sqlclass.Classify(query).Kind == sqlclass.TxControl:
		return outcome.Commit, outcome.WriteOnce
	case inTx:
		return outcome.InTx, outcome.WriteOnce
	case sqlclass.ReplaySafe(query):
		// A statement that only reads lost nothing but its answer.
		return outcome.Held, outcome.ReadOnce
	}
	return outcome.Held, outcome.WriteOnce
}

// decide hands err, a failure in phase under rule, to outcome.Decide and
// names what it means for the caller: failover.ErrCommitOutcomeUnknown or
// failover.ErrTxInterrupted, naming the host, or err as is. The driver has
// no say in the host's health: the Pool's probes and its check before each
// use of a connection see what this connection saw.
func (c *Conn) decide(phase outcome.Phase, rule outcome.Rule, callerDone bool, err error) error {
	if err == nil {
		return nil
	}
	f, err := outcome.Describe(err, phase, rule, c.target)
	f.CallerDone = callerDone
	switch outcome.Decide(f).Verdict {
	case outcome.FailUnknown:
		return &failover.HostError{Kind: failover.ErrCommitOutcomeUnknown, Addr: c.addr(), Err: err}
	case outcome.FailInterrupted:
		return &failover.HostError{Kind: failover.ErrTxInterrupted, Addr: c.addr(), Err: err}
	}
	return err
}

// rows names a failure met while reading the rows of a query, as
// Conn.QueryContext does for one met before the first row. Embedding keeps
// pgx's column type interfaces.
type rows struct {
	*pgxstdlib.Rows
	c     *Conn
	ctx   context.Context
	query string
	at    before
}

func (r *rows) Next(dest []driver.Value) error {
	if r.c.ended() {
		return failover.ErrClosed
	}
	return r.named(r.Rows.Next(dest))
}

// named gives err, met while reading the next row, the meaning a failure
// of the query has; the end of the rows passes through.
func (r *rows) named(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return r.c.meaning(r.ctx, r.query, r.at, err)
}

// stmt is pgx's prepared statement, run through its Conn.
type stmt struct {
	*pgxstdlib.Stmt
	c     *Conn
	query string
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.c.ExecContext(ctx, s.query, args)
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.c.QueryContext(ctx, s.query, args)
}

// tx names a failure of Commit: cut off with COMMIT in flight, the
// transaction may or may not have committed.
type tx struct {
	driver.Tx
	c *Conn
	// ctx is BeginTx's: database/sql rolls the transaction back when it
	// ends, and a COMMIT cut off by it may still commit.
	ctx context.Context
}

func (t *tx) Commit() error {
	if t.c.ended() {
		// Not sent: the transaction is rolled back when the connection
		// closes (pgxpool destroys a connection left in a transaction).
		return failover.ErrClosed
	}
	if t.c.closed() {
		// The connection was gone before COMMIT was sent: the server
		// rolled the transaction back.
		t.Tx.Rollback()
		return t.c.decide(outcome.Commit, outcome.WriteOnce, outcome.CallerDone(t.ctx), &outcome.NotSentError{Err: pgconn.ErrConnClosed})
	}
	return t.c.decide(outcome.Commit, outcome.WriteOnce, outcome.CallerDone(t.ctx), t.Tx.Commit())
}

func (t *tx) Rollback() error { return t.Tx.Rollback() }
