package failover

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgfailover/pgfailover/hosthealth"
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
// is Healthy or Unknown in the current routing state (routes.go). A host
// that fails is marked, and the routing state rebuilt, before the next
// pick, so the next pick passes it over. When no host is usable (every one
// refusing, unreachable or in the wrong role) the call waits for the
// routing state to change instead of dialling: the probes, which run
// faster while anyone waits (see probeSchedule), are then the only ones
// touching the hosts. The wait, and the whole call, is
// bounded by one deadline fixed at the first failover event
// (failover_max_duration) and by the caller's context.
type call struct {
	p      *Pool
	ctx    context.Context
	picker picker    // which hosts the call may use, best first
	host   *hostPool // host of the current attempt, nil before the first
	// sql is the statement of a QueryRow, Query or Exec, which a
	// connection opened ahead of a promotion prepares while the call
	// waits (standby.go); empty for any other call.
	sql string

	ev *callEvents

	// A read through the Reader: the position it must see (its causal
	// token's, or its pin's), if any.
	after replica.LSN

	// The small fields come last, where they pack into 8 bytes: a rows
	// carries a copy of the call, and at 160 bytes a slab of them fills
	// its allocation exactly (see rowSlabSize).
	tries uint16 // hosts picked so far, one per attempt (stops at its maximum)

	// A read through the Reader:
	pinned bool           // after comes from a write through the Pool (Reader.pin)
	reason replica.Reason // why it went where it goes
	verify bool           // check that the replica picked has replayed after

	// connect: the host of a long-lived connection is being chosen
	// (connectChain), so no pin after writes.
	connect     bool
	settledOnce bool // the call's outcome has been decided and counted
	episode     bool // a failover episode is under way: the call met a failure or waited
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
func (p *Pool) startCall(c *call, ctx context.Context) {
	c.p, c.ctx, c.picker = p, ctx, p.picker
}

// recording reports whether a success of the call records that it may
// have written (Pool.recordsWrites): then, and only then, the policy its
// attempt reports to done must say so. The Reader's calls never write.
func (c *call) recording() bool {
	return c.picker.reads == nil && c.p.recordsWrites(c.ctx)
}

// errKeep is what an attempt's op returns when it succeeded but the call
// goes on (rows still to be read): attempt returns nil without settling.
var errKeep = errors.New("pgfailover: attempt succeeded, call goes on")

// attempt runs op on a connection from each host the call picks, until op
// succeeds or the call settles. op releases the connection unless it keeps
// it, and returns its error with the policy that applies to it, which on
// success says whether the call may have written.
func (c *call) attempt(op func(*pgxpool.Conn) (policy, error)) error {
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
// while hosts fail. Connecting sends no statement, so a failed acquire may
// always move to the next host.
func (c *call) acquire() (*pgxpool.Conn, error) {
	for {
		h, err := c.pick()
		if err != nil {
			return nil, err
		}
		conn, err := c.acquireFrom(h)
		if err == nil && c.verify && !c.p.reader.confirm(c, h, conn) {
			// Not there yet: another replica, or the primary, takes the read.
			conn.Release()
			continue
		}
		if err == nil {
			if c.picker.reads != nil {
				c.p.telemetry.readRouted(c.ctx, c.reason)
			}
			return conn, nil
		}
		switch {
		case c.p.closed.Load():
			return nil, ErrClosed
		case h.retired.Load(), errors.Is(err, errHostNotUsable):
			continue // the host left the topology, or went down, while we waited for it
		case c.episode && c.ctx.Err() == nil && !c.timeLeft():
			// The budget, not the host, ended the attempt; what the host
			// did before says more than the budget's own deadline.
			c.noteFirst(h.addr, err)
			return nil, c.giveUp(ErrBudgetExhausted, nil)
		case !c.episode && c.ctx.Err() != nil:
			// The caller's context ended while it waited for a connection
			// of h (every one busy, or a dial under way): say where it
			// waited. errors.Is still finds the context's error.
			return nil, c.settled(nil, &acquireWaitError{err: err})
		}
		if err := c.done(err, idempotent); err != errRetry {
			return nil, err
		}
	}
}

// acquireFrom acquires a connection from host h. Once the call is failing
// over, connecting is bounded by what is left of the budget, so a host that
// does not answer cannot stretch it by a whole connect_timeout.
func (c *call) acquireFrom(h *hostPool) (*pgxpool.Conn, error) {
	pool := c.picker.poolOf(h)
	if !c.episode {
		return pool.Acquire(c.ctx)
	}
	// What is left of the budget, on the Pool's clock, bounds the dial.
	ctx, cancel := context.WithTimeout(c.ctx, c.ev.deadline.Sub(c.p.clock.Now()))
	defer cancel()
	return pool.Acquire(ctx)
}

// pick chooses the host for the next attempt, waiting while no host can
// take it.
func (c *call) pick() (*hostPool, error) {
	for {
		if c.p.closed.Load() {
			return nil, ErrClosed
		}
		if err := c.ctx.Err(); err != nil {
			c.traceDoneAcquire()
			return nil, c.giveUp(c.noHostOr(ErrBudgetExhausted), err)
		}
		rs := c.p.routes.Load()
		h, heldBack := c.picker.next(rs, c)
		if h != nil {
			c.host = h
			if c.tries < math.MaxUint16 {
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
	if c.episode {
		return
	}
	if _, ok := c.p.cfg.ConnConfig.Tracer.(pgxpool.AcquireTracer); !ok {
		return
	}
	if h, _ := c.picker.next(c.p.routes.Load(), c); h != nil {
		if conn, err := c.picker.poolOf(h).Acquire(c.ctx); err == nil {
			conn.Release() // not expected: the context has ended
		}
	}
}

// heldBack reports whether the call must not send to h yet: h failed under
// this call and the backoff before sending there again has not run out.
func (c *call) heldBack(h *hostPool) bool {
	return c.failedOn(h.addr) && c.p.clock.Now().Before(c.ev.notBefore)
}

// noHostOr returns ErrNoHost when every host is in the wrong role for the
// call's picker, else kind.
func (c *call) noHostOr(kind error) error {
	if c.picker.noHost(c.p.routes.Load().health) {
		return ErrNoHost
	}
	return kind
}

// wait blocks until what the picker reads in rs changes, the backoff before
// a re-send ends (when heldBack), the budget or the caller's context runs
// out, or the Pool closes. While it waits, the probes ask the reachable
// hosts from 2ms apart up to health_probe_wait_max apart, and watch a
// replica that a promotion would make usable (probeSchedule), so that a
// promotion is seen within tens of milliseconds.
func (c *call) wait(rs *routes, heldBack bool) error {
	c.startEpisode()
	now := c.p.clock.Now()
	until := c.ev.deadline
	if heldBack && c.ev.notBefore.Before(until) {
		until = c.ev.notBefore
	}
	if !now.Before(c.ev.deadline) {
		return c.giveUp(c.noHostOr(ErrBudgetExhausted), nil)
	}
	// The timer is set before the wait is counted: whoever sees the call
	// waiting sees its deadline armed.
	t := c.p.clock.NewTimer(until.Sub(now))
	defer t.Stop()
	c.p.waitStarted()
	defer c.p.waitEnded()
	if c.picker.reads == nil && !c.connect {
		c.p.waitingOnCalls.Add(1)
		defer c.p.waitingOnCalls.Add(-1)
		c.p.waitingSQL.add(c.sql)
		c.p.readyForPromotion()
	}
	defer func() { c.ev.waited += c.p.clock.Now().Sub(now) }()
	select {
	case <-c.picker.changed(rs):
		return nil
	case <-t.C():
		return nil // the deadline is checked again on the next round
	case <-c.ctx.Done():
		return c.giveUp(c.noHostOr(ErrBudgetExhausted), c.ctx.Err())
	case <-c.p.life.Done():
		return ErrClosed
	}
}

// done settles an attempt on c.host. err is what the attempt returned and
// rule what the statement allows. done returns nil on success, errRetry
// when the caller should try the next host, and otherwise the error to
// hand back. A success with rule including mayWrite tells the Pool that
// data may have changed. Once a call is settled, later errors (a rows or
// batch closed after its error was returned) pass through unchanged and
// are not counted again.
//
// A failure goes through four steps: classify (what the error and the
// statement say), mark (the host's health, and the call's episode), decide
// (the pure retry decision) and settle (the effects of the verdict).
func (c *call) done(err error, rule policy) error {
	if c.settledOnce {
		return err
	}
	if err == nil {
		if rule&mayWrite != 0 && c.picker.reads == nil {
			c.p.wrote(c.ctx, c.host)
		}
		c.finish(nil)
		return nil
	}
	err, f := classify(err, rule, c.picker.target)
	f.callerDone = c.ctx.Err() != nil
	c.mark(&f, err)
	f.failedOver, f.attempts, f.maxAttempts, f.timeLeft = c.episode, c.events().attempts, c.p.cfg.MaxAttempts, c.timeLeft()
	v, counts := decide(f)
	return c.settle(v, counts, f.callerDone, err)
}

// mark applies what failure f says of the host: its health (and the
// fallback's view) and the call's failover episode, which a first event
// starts.
func (c *call) mark(f *failure, err error) {
	mark, record := f.marks()
	class := f.meaning()
	if mark {
		c.p.markFailed(c.host, class, err)
	}
	if record {
		c.record(class, err)
	}
}

// settle applies verdict v on a failed attempt: a counted attempt holds
// the host back for a backoff before the call may send there again; the
// call then retries, or ends with err as the verdict says.
func (c *call) settle(v verdict, counts, callerDone bool, err error) error {
	if counts {
		c.holdBack()
	}
	switch v {
	case tryNext:
		return errRetry
	case failHost:
		return c.settled(nil, err)
	case failUnknown:
		return c.settled(ErrCommitOutcomeUnknown, err)
	case failBudget:
		if callerDone {
			c.note(c.host.addr, err)
			return c.giveUp(ErrBudgetExhausted, c.ctx.Err())
		}
		return c.giveUp(ErrBudgetExhausted, nil)
	}
	c.finish(err)
	return err
}

// holdBack counts a failed attempt on c.host and holds the host back for
// a backoff before the call may send there again.
func (c *call) holdBack() {
	ev := c.events()
	ev.attempts++
	ev.failed = append(ev.failed, c.host.addr)
	if ev.backoff == nil {
		ev.backoff = newFullJitter(c.p.cfg.BackoffInitial, c.p.cfg.BackoffMax)
	}
	ev.notBefore = c.p.clock.Now().Add(ev.backoff.NextBackOff())
}

// timeLeft reports whether the failover budget has time left.
func (c *call) timeLeft() bool {
	return !c.episode || c.p.clock.Now().Before(c.ev.deadline)
}

// failedOn reports whether this call failed on addr already.
func (c *call) failedOn(addr string) bool {
	if c.ev == nil {
		return false
	}
	for _, a := range c.ev.failed {
		if a == addr {
			return true
		}
	}
	return false
}

// settled ends a call that met a failover event and cannot complete: the
// error names the host and, with kind, what the failure means.
func (c *call) settled(kind, err error) error {
	addr := ""
	if c.host != nil {
		addr = c.host.addr
	}
	he := &HostError{Kind: kind, Addr: addr, Err: err}
	c.finish(he)
	return he
}

// finish records the outcome of the call, once. A call that met a failover
// episode counts as survived (err nil) or failed, and its episode's span
// ends. Inside RunTx the transaction function is what counts, so the call
// only tells RunTx it failed over.
func (c *call) finish(err error) {
	if c.settledOnce {
		return
	}
	c.settledOnce = true
	if !c.episode {
		return
	}
	if c.ev.waited > 0 {
		c.p.telemetry.waited(c.ctx, c.ev.span, c.ev.waited)
		c.p.waitsOver()
	}
	c.p.telemetry.endEpisode(c.ctx, c.ev.span, int(c.tries), err)
	c.p.logEpisode(c, err)
	if st, ok := c.ctx.Value(insideRunTx{}).(*runTxState); ok {
		st.failedOver = true
		return
	}
	c.p.telemetry.counted(c.ctx, err)
}

// startEpisode begins the call's failover episode, once: its span, and the
// deadline that bounds every wait and attempt from now on.
func (c *call) startEpisode() {
	if c.episode {
		return
	}
	c.episode = true
	ev := c.events()
	ev.deadline = c.p.clock.Now().Add(c.p.steer.budget(c.p.cfg.MaxDuration))
	ev.span = c.p.telemetry.startEpisode(c.ctx)
}

// record notes a failover event on the current host.
func (c *call) record(class hosthealth.Class, err error) {
	c.startEpisode()
	c.note(c.host.addr, err)
	c.p.telemetry.hostFailed(c.ev.span, c.host, class, err)
}

// noteFirst keeps err as host addr's outcome unless it has one.
func (c *call) noteFirst(addr string, err error) {
	for _, o := range c.events().outcomes {
		if o.Addr == addr {
			return
		}
	}
	c.note(addr, err)
}

// note keeps err as the last outcome of host addr.
func (c *call) note(addr string, err error) {
	ev := c.events()
	for i := range ev.outcomes {
		if ev.outcomes[i].Addr == addr {
			ev.outcomes[i].Err = err
			return
		}
	}
	ev.outcomes = append(ev.outcomes, HostError{Addr: addr, Err: err})
}

// giveUp ends the call with kind, listing each host's last outcome.
func (c *call) giveUp(kind, cause error) error {
	if kind == ErrBudgetExhausted && cause != nil && !c.episode {
		// The caller gave up before anything failed: the plain context
		// error, as pgxpool would return it.
		c.finish(cause)
		return cause
	}
	ev := c.events()
	fe := &FailoverError{Kind: kind, Cause: cause, Attempts: ev.attempts, Hosts: ev.outcomes}
	// Hosts the call never tried (it waited while they were down or in the
	// wrong role) are listed with what the Pool knew of them.
	s := c.p.routes.Load().health
	for i := range s.Len() {
		h := s.Host(i)
		if slices.ContainsFunc(fe.Hosts, func(o HostError) bool { return o.Addr == h.Addr }) {
			continue
		}
		var why error = &hosthealth.RoleError{Addr: h.Addr, Role: h.Role, Target: c.picker.target}
		if st := s.State(i, c.picker.target); st != hosthealth.TopologyReject {
			why = &hostStateError{state: st}
			if c.picker.reads != nil && st <= hosthealth.Unknown && h.Role == hosthealth.RoleReplica {
				if lagErr := c.picker.reads.lagError(h.Addr); lagErr != nil {
					why = lagErr
				}
			}
		}
		fe.Hosts = append(fe.Hosts, HostError{Addr: h.Addr, Err: why})
	}
	c.finish(fe)
	return fe
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
	return &readOnlyByChoice{err}
}

// readOnlyByChoice marks a 25006 that the application's own settings
// caused. call.done returns the error inside unchanged.
type readOnlyByChoice struct{ err error }

func (e *readOnlyByChoice) Error() string { return e.err.Error() }
func (e *readOnlyByChoice) Unwrap() error { return e.err }

// acquireWaitError is the error of a call whose context ended while it
// waited for a connection of its host. call.settled wraps it in a
// HostError naming the host.
type acquireWaitError struct{ err error }

func (e *acquireWaitError) Error() string { return "waiting for a connection: " + e.err.Error() }
func (e *acquireWaitError) Unwrap() error { return e.err }
