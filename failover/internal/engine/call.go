package engine

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/outcome"
	"github.com/pgfailover/pgfailover/replica"
)

// errRetry is what call.done returns when the statement should be run again
// on the next host. It never reaches the caller.
var errRetry = errors.New("pgfailover: retry")

// call is one pool-level call finding a host for its statement. It lives
// on the caller's stack, or is copied into the row or rows that carries
// it on, and allocates nothing until the first failover event: what it
// keeps from then on (callEvents) is behind a pointer, so that a call
// that meets none is small to copy.
//
// Each attempt goes to the best usable host for the target: one whose state
// is Healthy or Unknown in the current routing state (the Pool's routes). A host
// that fails is marked, and the routing state rebuilt, before the next
// pick, so the next pick passes it over. When no host is usable (every one
// refusing, unreachable or in the wrong role) the call waits for the
// routing state to change instead of dialling: the probes, which run
// faster while anyone waits (see probe.Schedule), are then the only ones
// touching the hosts. The wait, and the whole call, is
// bounded by one deadline fixed at the first failover event
// (failover_max_duration) and by the caller's context.
type call struct {
	e      *Engine
	ctx    context.Context
	picker picker         // which hosts the call may use, best first
	host   *hostpool.Host // host of the current attempt, nil before the first
	// sql is the statement of a QueryRow, Query or Exec, which a
	// connection opened ahead of a promotion prepares while the call
	// waits (hostpool.Set.WaitStarted); empty for any other call.
	sql string

	ev *callEvents

	// A read through the Reader: the position it must see (its causal
	// token's, or its pin's), if any.
	after replica.LSN

	// The small fields come last, where they pack into 8 bytes: a rows
	// carries a copy of the call, and at 160 bytes a slab of them fills
	// its allocation exactly (see rowSlabSize).

	// epoch is host's epoch when the attempt picked it: a failure the
	// attempt meets is news only if the host has not failed since.
	epoch  hoststate.Epoch
	tries  uint8          // hosts picked so far, one per attempt (stops at its maximum)
	reason replica.Reason // a read through the Reader: why it went where it goes
	flags  callFlags
}

// callFlags are a call's yes-or-no facts, in one byte of the call.
type callFlags uint8

const (
	// A read through the Reader:
	pinned    callFlags = 1 << iota // after comes from a write through the Pool (Reader.pin)
	verifyPos                       // check that the replica picked has replayed after

	// connect: the host of a long-lived connection is being chosen
	// (package follow), so no pin after writes.
	connect
	settledOnce // the call's outcome has been decided and counted
	episode     // a failover episode is under way: the call met a failure or waited
)

// is reports whether every flag of f is set on c.
func (c *call) is(f callFlags) bool { return c.flags&f == f }

// set sets or clears the flags of f on c.
func (c *call) set(f callFlags, on bool) {
	if on {
		c.flags |= f
	} else {
		c.flags &^= f
	}
}

// callEvents is what a call keeps once it meets a failover event, or,
// for a read through the Reader, a replica behind its position. It is nil
// until then (call.events makes it).
type callEvents struct {
	attempts  int       // failures that count against MaxAttempts
	deadline  time.Time // end of the failover budget, fixed when the episode starts
	outcomes  []HostError
	failed    []string  // hosts this call failed on (transport or transient)
	notBefore time.Time // no re-send to a host in failed before this
	backoff   *fullJitter
	waited    time.Duration // time spent waiting for a usable host
	spent     time.Duration // time a read through the Reader spent waiting for a replica to replay its position
	span      trace.Span    // the failover episode
	behind    []string      // replicas a read checked that had not replayed its position

	// A read through the Reader while no primary is usable (Reader.routeInOutage):
	outage replica.LSN // the position the replica picked must have replayed; zero: look at it first
	since  time.Time   // for a read not pinned: when the rule was first applied to it
	looked []string    // replicas looked at for the read
	short  []string    // replicas found short of the outage's position
}

// events returns what the call keeps of its events, made on first use.
func (c *call) events() *callEvents {
	if c.ev == nil {
		c.ev = new(callEvents)
	}
	return c.ev
}

// replaySpent is the time a read through the Reader has spent waiting for
// replicas to replay its position.
func (c *call) replaySpent() time.Duration {
	if c.ev == nil {
		return 0
	}
	return c.ev.spent
}

// passedOver reports whether the call has failed on a host, or found a
// replica behind its position: the hosts the next pick must pass over.
func (c *call) passedOver() bool {
	return c.ev != nil && (len(c.ev.failed) > 0 || len(c.ev.behind) > 0)
}

// startCall sets up c, a zero call, as a call of the Pool's made with
// ctx. Calls are set up in place, field by field: a call returned by value,
// or built as a composite literal, is built in a temporary and copied,
// which costs every call twice its size in stack.
func (e *Engine) startCall(c *call, ctx context.Context) {
	c.e, c.ctx, c.picker = e, ctx, picker{target: e.Target}
}

// recording reports whether a success of the call records that it may
// have written (Engine.recordsWrites): then, and only then, the policy its
// attempt reports to done must say so. The Reader's calls never write.
func (c *call) recording() bool {
	return c.picker.reads == nil && c.e.recordsWrites(c.ctx)
}

// errKeep is what an attempt's op returns when it succeeded but the call
// goes on (rows still to be read): attempt returns nil without settling.
var errKeep = errors.New("pgfailover: attempt succeeded, call goes on")

// attempt runs op on a connection from each host the call picks, until op
// succeeds or the call settles. op releases the connection unless it keeps
// it, and returns its error with the policy that applies to it, which on
// success says whether the call may have written.
func (c *call) attempt(op func(*pgxpool.Conn) (outcome.Rule, error)) error {
	for {
		conn, err := c.acquire()
		if err != nil {
			return err
		}
		rule, err := op(conn)
		if err == errKeep {
			return nil
		}
		if err = c.done(err, rule); err != errRetry {
			return err
		}
	}
}

// acquire picks the next host and acquires a connection from it, walking on
// while hosts fail. Connecting sends no statement, so a failed acquire is
// settled in outcome.Connect's phase (connectFailed): it moves to the next
// host unless outcome.Decide ends the call.
func (c *call) acquire() (*pgxpool.Conn, error) {
	for {
		h, err := c.pick()
		if err != nil {
			return nil, err
		}
		conn, err := c.acquireFrom(h)
		if err == nil && c.picker.reads != nil && c.e.reader.elsewhere(h, conn) {
			// Behind a name that spreads connections over servers, this
			// one's server is judged on the connection itself, whether
			// the read was routed to h as a replica or as the primary:
			// the server it reached may be neither.
			if !c.e.reader.confirmElsewhere(c, h, conn) {
				conn.Release()
				continue
			}
		} else if err == nil && c.is(verifyPos) && !c.e.reader.confirm(c, h, conn) {
			// Not there yet: another replica, or the primary, takes the read.
			conn.Release()
			continue
		}
		if err == nil {
			if c.picker.reads != nil {
				c.e.Telemetry.ReadRouted(c.ctx, c.reason)
			}
			return conn, nil
		}
		if c.e.Closed() {
			return nil, ErrClosed
		}
		gone := !c.e.State.Routes().Holds(h.Addr, h) || errors.Is(err, hostpool.ErrHostNotUsable)
		if err := c.connectFailed(err, gone); err != errRetry {
			return nil, err
		}
	}
}

// acquireFrom acquires a connection from host h. Once the call is failing
// over, connecting is bounded by what is left of the budget, so a host that
// does not answer cannot stretch it by a whole connect_timeout.
func (c *call) acquireFrom(h *hostpool.Host) (*pgxpool.Conn, error) {
	pool := c.picker.poolOf(h)
	if !c.is(episode) {
		return pool.Acquire(c.ctx)
	}
	// What is left of the budget, on the Pool's clock, bounds the dial.
	ctx, cancel := context.WithTimeout(c.ctx, c.ev.deadline.Sub(c.e.Clock.Now()))
	defer cancel()
	return pool.Acquire(ctx)
}

// pick chooses the host for the next attempt, waiting while no host can
// take it.
func (c *call) pick() (*hostpool.Host, error) {
	for {
		if c.e.Closed() {
			return nil, ErrClosed
		}
		if err := c.ctx.Err(); err != nil {
			c.traceDoneAcquire()
			return nil, c.giveUp(c.noHostOr(ErrBudgetExhausted), err)
		}
		rs := c.e.State.Routes()
		h, heldBack := c.picker.next(rs, c)
		if h != nil {
			c.host, c.epoch = h, c.e.Hosts.EpochOf(h)
			if c.tries < math.MaxUint8 {
				c.tries++
			}
			return h, nil
		}
		if err := c.wait(rs, heldBack); err != nil {
			return nil, err
		}
	}
}

// traceDoneAcquire lets a ConnConfig.Tracer that is a pgxpool.AcquireTracer
// see an acquire that fails because the caller's context ended before the
// call met any failover event, as pgxpool's tracer sees it: the best host's
// pool is asked once with that context, which fails at once.
func (c *call) traceDoneAcquire() {
	if c.is(episode) {
		return
	}
	if !c.e.TracesAcquire {
		return
	}
	if h, _ := c.picker.next(c.e.State.Routes(), c); h != nil {
		if conn, err := c.picker.poolOf(h).Acquire(c.ctx); err == nil {
			conn.Release() // not expected: the context has ended
		}
	}
}

// heldBack reports whether the call must not send to h yet: h failed under
// this call and the backoff before sending there again has not run out.
func (c *call) heldBack(h *hostpool.Host) bool {
	return c.failedOn(h.Addr) && c.e.Clock.Now().Before(c.ev.notBefore)
}

// noHostOr returns ErrNoHost when every host is in the wrong role for the
// call's picker, else kind.
func (c *call) noHostOr(kind error) error {
	if c.picker.noHost(c.e.State.Routes().Health) {
		return ErrNoHost
	}
	return kind
}

// wait blocks until what the picker reads in rs changes, the backoff before
// a re-send ends (when heldBack), the budget or the caller's context runs
// out, or the Pool closes. While it waits, the probes ask the reachable
// hosts from 2ms apart up to health_probe_wait_max apart, and watch a
// replica that a promotion would make usable (probe.Schedule), so that a
// promotion is seen within tens of milliseconds.
func (c *call) wait(rs *routes, heldBack bool) error {
	c.startEpisode()
	now := c.e.Clock.Now()
	until := c.ev.deadline
	if heldBack && c.ev.notBefore.Before(until) {
		until = c.ev.notBefore
	}
	if !now.Before(c.ev.deadline) {
		return c.giveUp(c.noHostOr(ErrBudgetExhausted), nil)
	}
	// The timer is set before the wait is counted: whoever sees the call
	// waiting sees its deadline armed.
	t := c.e.Clock.NewTimer(until.Sub(now))
	defer t.Stop()
	onCalls := c.picker.reads == nil && !c.is(connect)
	c.e.Hosts.WaitStarted(onCalls, c.sql)
	defer c.e.Hosts.WaitEnded(onCalls)
	defer func() { c.ev.waited += c.e.Clock.Now().Sub(now) }()
	select {
	case <-c.picker.changed(rs):
		return nil
	case <-t.C():
		return nil // the deadline is checked again on the next round
	case <-c.ctx.Done():
		return c.giveUp(c.noHostOr(ErrBudgetExhausted), c.ctx.Err())
	case <-c.e.Life.Done():
		return ErrClosed
	}
}

// explainRefusal looks again at a statement refused with 25006 (read-only
// transaction) while its connection is still held. The refusal means the
// host is in the wrong role when the server is a standby or is fenced
// read-only by its own configuration. A read-only transaction, role or
// database setting is the application's own choice: the error is then an
// ordinary one, returned as is, and the host keeps its connections.
func explainRefusal(ctx context.Context, conn *pgxpool.Conn, err error) error {
	if err == nil {
		return nil // before anything escapes: the happy path allocates nothing here
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" || conn.Conn().PgConn().TxStatus() != 'I' {
		return err
	}
	var inRecovery bool
	var source string
	q := "SELECT pg_is_in_recovery(), source FROM pg_settings WHERE name = 'default_transaction_read_only'"
	if conn.QueryRow(ctx, q).Scan(&inRecovery, &source) != nil || inRecovery {
		return err
	}
	if hosthealth.FencedBy(source) {
		return err // fenced by the server's configuration
	}
	return &outcome.ByChoiceError{Err: err}
}

// acquireWaitError is the error of a call whose context ended while it
// waited for a connection of its host. call.settled wraps it in a
// HostError naming the host.
type acquireWaitError struct{ err error }

func (e *acquireWaitError) Error() string { return "waiting for a connection: " + e.err.Error() }
func (e *acquireWaitError) Unwrap() error { return e.err }
