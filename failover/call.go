package failover

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// policy says whether a failed statement may run again on another host,
// and what its failure means.
type policy uint8

const (
	// replayable: running it again cannot repeat an effect, even after it
	// reached the server (connecting, BEGIN, a ping, a replay-safe read
	// before its first row reached the caller).
	replayable policy = 1 << iota
	// retryUnsent: it may run again when it provably did nothing.
	retryUnsent
	// writes: it may write, so when it is cut off in flight its outcome is
	// unknown.
	writes

	// Common combinations.
	idempotent = replayable | retryUnsent
	write      = retryUnsent | writes
	readOnce   = retryUnsent // a read that is not to be replayed
	delivered  = policy(0)   // part of its result reached the caller
)

// errRetry is what call.done returns when the statement should be run again
// on the next host. It never reaches the caller.
var errRetry = errors.New("pgfailover: retry")

// call is one pool-level call walking the hosts. It lives on the caller's
// stack and allocates nothing until the first failover event.
//
// A call walks in rounds. Each round visits every host once, best ranked
// first; the ranking is read afresh before each pick, so a host marked
// failed is passed over at once (mark before pick). A round that ends with
// every host refusing on role grounds ends the call with ErrNoHost; any
// other exhausted round pays one backoff pause and starts again.
type call struct {
	p    *Pool
	ctx  context.Context
	host int // host of the current attempt, -1 before the first

	tried       hostSet
	roleRejects int // hosts in this round that refused on role grounds

	settledOnce bool // the call's outcome has been decided and counted

	events   int       // failover events seen by this call
	attempts int       // attempts that count against MaxAttempts
	started  time.Time // time of the first failover event
	outcomes []error   // last error per host, allocated at the first event
	backoff  *fullJitter
	span     trace.Span // the failover episode, from the first event
}

func (p *Pool) newCall(ctx context.Context) call {
	return call{p: p, ctx: ctx, host: -1}
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
		if err == nil {
			return conn, nil
		}
		switch {
		case c.p.closed.Load():
			return nil, ErrClosed
		case c.events > 0 && c.ctx.Err() == nil && time.Since(c.started) >= c.p.cfg.MaxDuration:
			// The budget, not the host, ended the attempt.
			return nil, c.giveUp(ErrBudgetExhausted, nil)
		}
		if err := c.done(err, idempotent); err != errRetry {
			return nil, err
		}
	}
}

// acquireFrom acquires a connection from host h. Once the call is failing
// over, connecting is bounded by what is left of failover_max_duration, so
// a host that does not answer cannot stretch the budget by a whole
// connect_timeout per host.
func (c *call) acquireFrom(h int) (*pgxpool.Conn, error) {
	if c.events == 0 {
		return c.p.hosts[h].pool.Acquire(c.ctx)
	}
	ctx, cancel := context.WithDeadline(c.ctx, c.started.Add(c.p.cfg.MaxDuration))
	defer cancel()
	return c.p.hosts[h].pool.Acquire(ctx)
}

// pick chooses the host for the next attempt.
func (c *call) pick() (int, error) {
	for {
		if c.p.closed.Load() {
			return -1, ErrClosed
		}
		if err := c.ctx.Err(); err != nil {
			return -1, c.giveUp(ErrBudgetExhausted, err)
		}
		for _, h := range c.p.tracker.Ranking() {
			if !c.tried.has(h) {
				c.tried.add(h)
				c.host = h
				return h, nil
			}
		}
		// The round is over.
		if c.roleRejects == c.p.tracker.Len() {
			return -1, c.giveUp(ErrNoHost, nil)
		}
		if err := c.pause(); err != nil {
			return -1, err
		}
		c.tried.clear()
		c.roleRejects = 0
	}
}

// done settles an attempt on c.host. err is what the attempt returned and
// rule says whether the statement may run again. done returns nil on success,
// errRetry when the caller should try the next host, and otherwise the
// error to hand back. Once a call is settled, later errors (a rows or batch
// closed after its error was returned) pass through unchanged and are not
// counted again.
func (c *call) done(err error, rule policy) error {
	if c.settledOnce {
		return err
	}
	if err == nil {
		c.finish(nil)
		return nil
	}
	unrun := provablyUnrun(err)
	if c.ctx.Err() != nil {
		// The caller gave up. A write cut off in flight may still commit.
		switch {
		case rule&writes != 0 && !unrun:
			return c.settled(ErrCommitOutcomeUnknown, err)
		case c.events > 0 && rule&(replayable|retryUnsent) != 0:
			// It would have moved on, but the deadline came first.
			c.outcomes[c.host] = err
			return c.giveUp(ErrBudgetExhausted, c.ctx.Err())
		}
		return c.failedSafely(err)
	}
	if rc, ok := err.(*readOnlyByChoice); ok {
		return c.failedSafely(rc.err)
	}
	class := hosthealth.Classify(err)
	if class == hosthealth.NotFailover {
		return c.failedSafely(err)
	}
	h := c.host
	c.p.markFailed(h, class)
	c.record(h, class, err)
	switch {
	case class == hosthealth.Terminal:
		// Credentials and database names are the same on every host, so
		// trying the others would only fill their logs.
		return c.settled(nil, err)
	case rule&replayable != 0, unrun && rule&retryUnsent != 0:
		// Safe to run again.
	case unrun:
		// It did nothing, but cannot be sent again (COPY has consumed its
		// rows): a plain error.
		return c.settled(nil, err)
	case rule&writes != 0 && class == hosthealth.Transport:
		return c.settled(ErrCommitOutcomeUnknown, err)
	default:
		return c.settled(nil, err)
	}
	if class == hosthealth.Topology {
		c.roleRejects++
		return errRetry
	}
	c.attempts++
	if c.attempts >= c.p.cfg.MaxAttempts || time.Since(c.started) >= c.p.cfg.MaxDuration {
		return c.giveUp(ErrBudgetExhausted, nil)
	}
	return errRetry
}

// settled ends a call that met a failover event and cannot complete: the
// error names the host and, with kind, what the failure means.
func (c *call) settled(kind, err error) error {
	addr := ""
	if c.host >= 0 {
		addr = c.p.hosts[c.host].addr
	}
	he := &HostError{Kind: kind, Addr: addr, Err: err}
	c.finish(he)
	return he
}

// finish records the outcome of the call, once. A call that met a failover
// event counts as survived (err nil) or failed, and its episode's span
// ends. Inside RunTx the transaction function is what counts, so the call
// only tells RunTx it failed over.
func (c *call) finish(err error) {
	if c.settledOnce {
		return
	}
	c.settledOnce = true
	if c.events == 0 {
		return
	}
	c.p.telemetry.endEpisode(c.span, err)
	if st, ok := c.ctx.Value(insideRunTx{}).(*runTxState); ok {
		st.failedOver = true
		return
	}
	if err == nil {
		c.p.telemetry.survived(c.ctx)
	} else {
		c.p.telemetry.failed(c.ctx)
	}
}

// failedSafely returns an error that is not a failover event. When the call
// had already failed over, the failover could not complete, and says so.
func (c *call) failedSafely(err error) error {
	c.finish(err)
	return err
}

// provablyUnrun reports whether err proves that the statement did nothing:
// it never reached the server, or the server refused it before running it
// (a write on a standby, a server still starting up).
func provablyUnrun(err error) bool {
	if pgconn.SafeToRetry(err) && !closedWhileReading(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "25006", "57P03":
			return true
		}
	}
	return false
}

// closedWhileReading reports whether err is pgconn's "conn closed" lock
// error. pgconn returns it, claiming it is safe to retry, in two cases: a
// call made on a connection that was already closed (nothing sent), and a
// connection that failed while the result of a statement already sent was
// being read (pgconn closes the connection on the failed read, and its
// next receive finds it closed). The Pool only sends statements on
// connections that were open when acquired, so for it the error always
// means the second case: the statement may have run. The type is
// unexported, so it is recognised by its type name.
func closedWhileReading(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if reflect.TypeOf(e).String() == "*pgconn.connLockError" {
			return true
		}
	}
	return false
}

func (c *call) record(h int, class hosthealth.Class, err error) {
	if c.events == 0 {
		c.started = time.Now()
		c.outcomes = make([]error, len(c.p.hosts))
		c.span = c.p.telemetry.startEpisode(c.ctx)
	}
	c.events++
	c.outcomes[h] = err
	c.p.telemetry.hostFailed(c.span, c.p.hosts[h].addr, class, err)
}

// pause waits out one backoff step between rounds, within the budget.
func (c *call) pause() error {
	if c.backoff == nil {
		c.backoff = newFullJitter(c.p.cfg.BackoffInitial, c.p.cfg.BackoffMax)
	}
	wait := c.backoff.NextBackOff()
	if c.events > 0 && time.Since(c.started)+wait > c.p.cfg.MaxDuration {
		return c.giveUp(ErrBudgetExhausted, nil)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-c.ctx.Done():
		return c.giveUp(ErrBudgetExhausted, c.ctx.Err())
	case <-c.p.life.Done():
		return ErrClosed
	}
}

// giveUp ends the walk with kind, listing each host's last outcome.
func (c *call) giveUp(kind, cause error) error {
	if kind == ErrBudgetExhausted && cause != nil && c.events == 0 {
		// The caller gave up before anything failed: the plain context
		// error, as pgxpool would return it.
		c.finish(cause)
		return cause
	}
	fe := &FailoverError{Kind: kind, Cause: cause, Attempts: c.attempts}
	for h, err := range c.outcomes {
		if err != nil {
			fe.Hosts = append(fe.Hosts, HostError{Addr: c.p.hosts[h].addr, Err: err})
		}
	}
	c.finish(fe)
	return fe
}

// hostSet is a set of host indexes. Up to 64 hosts need no allocation.
type hostSet struct {
	small uint64
	large []uint64
}

func (s *hostSet) has(i int) bool {
	if i < 64 {
		return s.small&(1<<uint(i)) != 0
	}
	i -= 64
	return i/64 < len(s.large) && s.large[i/64]&(1<<uint(i%64)) != 0
}

func (s *hostSet) add(i int) {
	if i < 64 {
		s.small |= 1 << uint(i)
		return
	}
	i -= 64
	for len(s.large) <= i/64 {
		s.large = append(s.large, 0)
	}
	s.large[i/64] |= 1 << uint(i%64)
}

func (s *hostSet) clear() {
	s.small = 0
	clear(s.large)
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
	switch source {
	case "configuration file", "command line", "environment variable", "override":
		return err // fenced by the server's configuration
	}
	return &readOnlyByChoice{err}
}

// readOnlyByChoice marks a 25006 that the application's own settings
// caused. call.done returns the error inside unchanged.
type readOnlyByChoice struct{ err error }

func (e *readOnlyByChoice) Error() string { return e.err.Error() }
func (e *readOnlyByChoice) Unwrap() error { return e.err }
