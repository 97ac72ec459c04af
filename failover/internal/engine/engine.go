package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover/internal/follow"
	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/backoff"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/outcome"
	"github.com/pgfailover/pgfailover/internal/telemetry"
	"github.com/pgfailover/pgfailover/replica"
)

// Settings are the values of a Pool's configuration that its calls read.
type Settings struct {
	Target             hosthealth.Target
	MaxAttempts        int           // failover_max_attempts
	MaxDuration        time.Duration // failover_max_duration
	BackoffInitial     time.Duration // failover_backoff_initial
	BackoffMax         time.Duration // failover_backoff_max
	HealthProbeTimeout time.Duration // health_probe_timeout, which bounds a sample of the primary's position
	Replica            replica.Policy
	ReplicaWait        time.Duration // replica_wait
	// TracesAcquire says that the connections' Tracer is a
	// pgxpool.AcquireTracer (see call.traceDoneAcquire).
	TracesAcquire bool
}

// Engine runs a Pool's calls over its hosts. Its exported fields are set
// once, while the Pool is built and before any call; Init sets the
// Settings and the Reader. An Engine is safe for concurrent use.
type Engine struct {
	Settings
	Clock     clock.Clock
	Telemetry *telemetry.Instruments
	Log       telemetry.Logger // the Pool's log lines
	// State owns what the Pool knows of its hosts and publishes the
	// routing value the picks read; Hosts is the hosts at work, through
	// which every observation of a call's reaches State, but the answer
	// to a pinned read's request for a sample (State.AnswerSample).
	State *hoststate.Owner[hostpool.Host]
	Hosts *hostpool.Set
	Steer Steerer         // the local-first fallback, or NoSteer
	Life  context.Context // ends when the Pool closes: stops every wait

	reader Reader
	closed atomic.Bool

	// lastWrite is the clock reading (Unix nanoseconds) when a call that
	// may have written last succeeded, once the Reader has been asked for
	// (see recordsWrites).
	lastWrite atomic.Int64
	// readerTaken says that the Reader has been asked for; calledOnce that
	// a call has succeeded. Each is stored once.
	readerTaken atomic.Bool
	calledOnce  atomic.Bool

	classes classes // the classifications of the statements seen
}

// Init sets the engine's settings, and its Reader's from them.
func (e *Engine) Init(s Settings) {
	e.Settings = s
	e.reader = Reader{e: e, wait: s.ReplicaWait, router: replica.Router{Policy: s.Replica}}
}

// MarkClosed records that the Pool is closing: calls fail with ErrClosed
// from then on.
func (e *Engine) MarkClosed() { e.closed.Store(true) }

// Closed reports whether the Pool is closing.
func (e *Engine) Closed() bool { return e.closed.Load() }

// BackoffPolicy is the Pool's backoff: failover_backoff_initial and
// failover_backoff_max, full jitter, on the Pool's clock.
func (e *Engine) BackoffPolicy() backoff.Policy {
	return backoff.Policy{Initial: e.BackoffInitial, Max: e.BackoffMax, Clock: e.Clock}
}

// Acquire returns a connection from the best host for the target, as
// Pool.Acquire does.
func (e *Engine) Acquire(ctx context.Context) (*pgxpool.Conn, error) {
	var c call
	e.startCall(&c, ctx)
	conn, err := c.acquire()
	if err != nil {
		return nil, err
	}
	return conn, c.done(nil, outcome.Idempotent)
}

// Ping checks that a host satisfying the target answers, as Pool.Ping
// does.
func (e *Engine) Ping(ctx context.Context) error {
	var c call
	e.startCall(&c, ctx)
	return c.attempt(func(conn *pgxpool.Conn) (outcome.Rule, error) {
		err := conn.Ping(ctx)
		conn.Release()
		return outcome.Idempotent, err
	})
}

// Exec runs sql as Pool.Exec does: it moves to another host only when
// the statement provably did nothing on the first.
func (e *Engine) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var c call
	e.startCall(&c, ctx)
	c.sql = sql
	var tag pgconn.CommandTag
	err := c.attempt(func(conn *pgxpool.Conn) (outcome.Rule, error) {
		var err error
		tag, err = conn.Exec(ctx, sql, args...)
		err = explainRefusal(ctx, conn, err)
		conn.Release()
		if err == nil && !c.recording() {
			return 0, nil
		}
		return e.classes.execPolicy(ctx, sql), err
	})
	return tag, err
}

// CopyFrom runs a COPY FROM as Pool.CopyFrom does: it moves to another
// host only while no row has been read from rowSrc, and only when the
// COPY provably did nothing.
func (e *Engine) CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error) {
	src := &watchedSource{CopyFromSource: rowSrc}
	var c call
	e.startCall(&c, ctx)
	var n int64
	err := c.attempt(func(conn *pgxpool.Conn) (outcome.Rule, error) {
		var err error
		n, err = conn.Conn().CopyFrom(ctx, tableName, columnNames, src)
		conn.Release()
		if err == nil && !c.recording() {
			return 0, nil
		}
		if src.touched {
			return outcome.MayWrite, err // rows were consumed: never sent again
		}
		return outcome.WriteOnce, err
	})
	return n, err
}

// watchedSource remembers whether COPY has started reading rows.
type watchedSource struct {
	pgx.CopyFromSource
	touched bool
}

func (s *watchedSource) Next() bool {
	s.touched = true
	return s.CopyFromSource.Next()
}

// BeginTx starts a transaction on the best host, as Pool.BeginTx does:
// BEGIN fails over freely, and the transaction is pinned to its host.
func (e *Engine) BeginTx(ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error) {
	var c call
	e.startCall(&c, ctx)
	return e.beginTx(&c, ctx, txOptions)
}

// beginTx begins a transaction through call c.
func (e *Engine) beginTx(c *call, ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error) {
	var t *tx
	err := c.attempt(func(conn *pgxpool.Conn) (outcome.Rule, error) {
		inner, err := conn.BeginTx(ctx, txOptions)
		if err != nil {
			conn.Release()
			return outcome.Idempotent, err
		}
		t = &tx{Tx: &pinnedTx{Tx: inner, conn: conn}, e: e, host: c.host, epoch: c.epoch, writes: txOptions.AccessMode != pgx.ReadOnly}
		return outcome.Idempotent, nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// fullJitter is the backoff of a call between attempts: see
// backoff.FullJitter.
type fullJitter = backoff.FullJitter

// ConnectWalk returns the walk of one connect of a pool that follows the
// hosts (package follow) with ctx: a call of the Pool's, or with reads
// one of the Reader's, placing a long-lived connection.
func (e *Engine) ConnectWalk(ctx context.Context, reads bool) follow.Walk {
	w := &connectWalk{}
	if reads {
		e.reader.startReadCall(&w.c, ctx)
	} else {
		e.startCall(&w.c, ctx)
	}
	w.c.set(connect, true)
	return w
}

// connectWalk is the call that walks one connect of a following pool
// over the hosts (follow.Walk): the same choice of host, backoff and
// budget as the Pool's own calls.
type connectWalk struct{ c call }

func (w *connectWalk) Pick() (*hostpool.Host, error) { return w.c.pick() }
func (w *connectWalk) Connected()                    { w.c.finish(nil) } // ends the episode, if the connect had one

// Failed settles a connect that failed on h as a call's attempt that did
// nothing is settled (outcome.Decide, then call.apply): h is marked and
// held back for a backoff, and the connect ends with ErrBudgetExhausted
// once failover_max_attempts or failover_max_duration is spent.
func (w *connectWalk) Failed(h *hostpool.Host, err *follow.ConnectError) error {
	c := &w.c
	if c.host != h {
		c.host, c.epoch = h, c.e.Hosts.EpochOf(h)
	}
	f := outcome.Failure{Phase: outcome.Call, Class: hosthealth.Transport, Rule: outcome.Idempotent, DidNotRun: true}
	c.progress(&f)
	if err.Reached {
		f.Class = hosthealth.Transient // it answered, and refused
	}
	if e := c.apply(outcome.Decide(f), err); e != errRetry {
		return e
	}
	return nil
}
