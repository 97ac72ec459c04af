package failover

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/internal/backoff"
	"github.com/pgfailover/pgfailover/internal/outcome"
)

// ErrListenGap is wrapped by the *GapError that Listener.Next returns after
// it re-established its session: notifications may have been missed.
var ErrListenGap = errors.New("pgfailover: listen session lost and re-established")

// GapError reports that a Listener's session was lost (its server died,
// was demoted or shut down) and that a new session, on the host the Pool
// now picks, LISTENs again. PostgreSQL does not queue notifications for a
// session that is gone, so those sent between Since and Regained may never
// arrive: catch up from the data itself (re-read the rows a notification
// would have pointed at, changed since Since). The Listener is usable; call
// Next again.
type GapError struct {
	// Since is the last time the old session was known to be listening:
	// its last notification, or the end of its LISTENs.
	Since time.Time
	// Lost is when the Listener found the old session gone.
	Lost time.Time
	// Regained is when the new session's LISTENs were done.
	Regained time.Time
	// Addr is the remote address of the new session's socket: the
	// server's resolved IP and port, or its socket path.
	Addr string
	// Cause is why the old session was lost.
	Cause error
}

func (e *GapError) Error() string {
	return ErrListenGap.Error() + " (listening again on " + e.Addr + " after " +
		e.Regained.Sub(e.Lost).Round(time.Millisecond).String() + "): " + e.Cause.Error()
}

func (e *GapError) Unwrap() []error { return []error{ErrListenGap, e.Cause} }

// Listener is one session that LISTENs on a set of channels on a host the
// Pool picks for its target (the primary by default), and that moves to
// the new primary after a failover.
//
// pgxlisten (github.com/jackc/pgxlisten) also reconnects, but it dials the
// connection string it was given: after a failover it may reconnect to the
// demoted server, or retry a dead one, and it says nothing of what was
// missed beyond calling each handler's backlog hook. A Listener takes its
// session from the Pool, so the new session goes where the Pool's writes
// go (role check, host health, waiting out the failover within the
// failover budget), and the gap comes back as a typed *GapError with its
// times, once per lost session.
//
// A Listener is used by one goroutine at a time, like a pgx.Conn: to stop a
// Next in progress, cancel its context, then Close. The Pool's Close ends
// it too, from its own goroutine: it cuts the session, and Next (one in
// progress included) returns ErrClosed.
type Listener struct {
	pool     *Pool
	channels []string
	conn     *pgx.Conn // nil while the session is lost
	addr     string    // the remote address of conn's socket
	since    time.Time // last time conn was known to be listening
	lost     time.Time // when conn was found gone; zero while it works
	cause    error     // why it was lost
	closed   bool
	done     chan struct{} // closed by Close: the Pool need not end the Listener

	// mu guards sock and ended, which the Pool's Close reaches from its own
	// goroutine (see endWithPool). No I/O while held.
	mu    sync.Mutex
	sock  net.Conn // conn's socket, nil while there is no session
	ended bool     // the Pool closed: sock was cut, and a new one would be
}

// Listen takes a session from the Pool for the Listener and LISTENs on each
// channel in it. The session is the Listener's own: it is taken out of the
// Pool (it does not count against pool_max_conns) and ends with Close, or
// with the Pool's Close, after which Next returns ErrClosed.
func (p *Pool) Listen(ctx context.Context, channels ...string) (*Listener, error) {
	if len(channels) == 0 {
		return nil, errors.New("pgfailover: Listen needs at least one channel")
	}
	l := &Listener{pool: p, channels: append([]string(nil), channels...), done: make(chan struct{})}
	if err := l.connect(ctx); err != nil {
		return nil, err
	}
	if !p.goUnlessClosed(l.endWithPool) {
		l.Close()
		return nil, ErrClosed
	}
	return l, nil
}

// goUnlessClosed runs f on a goroutine of the Pool's, which Close joins; f
// must return once p.eng.Life ends. It runs nothing and reports false once the
// Pool is closing. topoMu makes the check and the start one step against
// Close, which sets closed before it takes topoMu and waits for bg after.
func (p *Pool) goUnlessClosed(f func()) bool {
	p.topoMu.Lock()
	defer p.topoMu.Unlock()
	if p.eng.Closed() {
		return false
	}
	p.bg.Go(f)
	return true
}

// endWithPool ends the Listener when the Pool closes first: it cuts the
// session's socket, which is safe beside a Next reading it (pgx's own state
// is left to the Listener's goroutine), and the server ends the session.
func (l *Listener) endWithPool() {
	select {
	case <-l.pool.eng.Life.Done():
	case <-l.done:
		return
	}
	l.mu.Lock()
	l.ended = true
	sock := l.sock
	l.sock = nil
	l.mu.Unlock()
	if sock != nil {
		sock.Close()
	}
}

// poolEnded reports whether the Pool's Close ended the Listener.
func (l *Listener) poolEnded() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ended
}

// setConn makes conn the Listener's session (nil: none). It refuses a new
// session once the Pool ended the Listener.
func (l *Listener) setConn(conn *pgx.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.conn, l.sock = conn, nil
	if conn == nil {
		return true
	}
	if l.ended {
		l.conn = nil
		return false
	}
	l.sock = conn.PgConn().Conn()
	return true
}

// drop closes the session, if any. A session the Pool cut closes at once:
// its socket is gone.
func (l *Listener) drop() error {
	conn := l.conn
	l.setConn(nil)
	if conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return conn.Close(ctx)
}

// connect takes a session from the Pool and issues the LISTENs. The Pool's
// Acquire waits for a usable host within the failover budget.
func (l *Listener) connect(ctx context.Context) error {
	pc, err := l.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack()
	var b strings.Builder
	for _, ch := range l.channels {
		b.WriteString("LISTEN ")
		b.WriteString(pgx.Identifier{ch}.Sanitize())
		b.WriteString(";")
	}
	if _, err := conn.Exec(ctx, b.String()); err != nil {
		conn.Close(context.Background())
		return err
	}
	if !l.setConn(conn) {
		conn.Close(context.Background())
		return ErrClosed
	}
	l.addr, l.since = conn.PgConn().Conn().RemoteAddr().String(), l.pool.eng.Clock.Now()
	return nil
}

// Next waits for the next notification on any of the Listener's channels.
// When the session is found lost, Next takes a new one from the Pool,
// LISTENs again and returns a *GapError (errors.Is ErrListenGap); while no
// host can take it (the Pool's budget runs out, or the new session breaks
// before its LISTENs), Next keeps trying, with the Pool's backoff, until
// ctx ends. A failure no retry can mend (a wrong password, a missing
// database or permission: a *HostError the Pool gave up on at once) is
// returned at once. Other errors: ctx's, and ErrClosed after Close or once
// the Pool is closed (a Next waiting when the Pool closes returns it too).
func (l *Listener) Next(ctx context.Context) (*pgconn.Notification, error) {
	if l.closed {
		return nil, ErrClosed
	}
	if l.poolEnded() {
		l.drop()
		return nil, ErrClosed
	}
	if l.conn == nil {
		return nil, l.regain(ctx)
	}
	n, err := l.conn.WaitForNotification(ctx)
	if err == nil {
		l.since = l.pool.eng.Clock.Now()
		return n, nil
	}
	if l.poolEnded() {
		l.drop()
		return nil, ErrClosed
	}
	if outcome.CallerDone(ctx) && !l.conn.IsClosed() {
		return nil, ctx.Err() // the session is still good
	}
	l.drop()
	l.lost, l.cause = l.pool.eng.Clock.Now(), err
	return nil, l.regain(ctx)
}

// regain takes a new session, issues the LISTENs and returns the
// *GapError that reports the loss, or the error that stopped it.
func (l *Listener) regain(ctx context.Context) error {
	since := l.since // connect moves it to the new session's LISTENs
	waits := l.pool.eng.BackoffPolicy().Start()
	for {
		err := l.connect(ctx)
		if err == nil {
			break
		}
		if outcome.CallerDone(ctx) || errors.Is(err, ErrClosed) || !l.resumable(err) {
			return err
		}
		switch waits.Wait(ctx, l.pool.eng.Life.Done()) {
		case nil:
		case backoff.ErrStopped:
			return ErrClosed
		default:
			return err
		}
	}
	gap := &GapError{Since: since, Lost: l.lost, Regained: l.since, Addr: l.addr, Cause: l.cause}
	l.lost, l.cause = time.Time{}, nil
	return gap
}

// resumable reports whether a new session may be sought again after err.
// The Pool's Acquire decided already: it keeps no host it could try
// within its budget (ErrBudgetExhausted, ErrNoHost), or it failed on a
// host for good (any other *HostError: it would fail the same way on every
// host). An error after Acquire, from the LISTENs, is decided as a
// replayable statement's is.
func (l *Listener) resumable(err error) bool {
	if errors.Is(err, ErrBudgetExhausted) || errors.Is(err, ErrNoHost) {
		return true
	}
	if _, ok := errors.AsType[*HostError](err); ok {
		return false
	}
	f, _ := outcome.Describe(err, outcome.Call, outcome.Idempotent, l.pool.cfg.Target)
	f.MaxAttempts, f.TimeLeft = 2, true
	return outcome.Decide(f).Verdict == outcome.TryNext
}

// Close closes the Listener's session (which ends its LISTENs). It may be
// called again, and after the Pool's Close, which ended the session
// already; it must not run alongside Next.
func (l *Listener) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	close(l.done)
	err := l.drop()
	if l.poolEnded() {
		return nil // the Pool cut the session: closing it found its socket gone
	}
	return err
}
