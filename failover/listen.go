package failover

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
	// Addr is host:port of the new session's server.
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
// Next in progress, cancel its context, then Close.
type Listener struct {
	pool     *Pool
	channels []string
	conn     *pgx.Conn // nil while the session is lost
	addr     string    // host:port of conn's server
	since    time.Time // last time conn was known to be listening
	lost     time.Time // when conn was found gone; zero while it works
	cause    error     // why it was lost
	closed   bool
}

// Listen takes a session from the Pool for the Listener and LISTENs on each
// channel in it. The session is the Listener's own: it is taken out of the
// Pool (it does not count against pool_max_conns, and Pool.Close does not
// close it) and closed by Close; close the Listener before the Pool.
func (p *Pool) Listen(ctx context.Context, channels ...string) (*Listener, error) {
	if len(channels) == 0 {
		return nil, errors.New("pgfailover: Listen needs at least one channel")
	}
	l := &Listener{pool: p, channels: append([]string(nil), channels...)}
	if err := l.connect(ctx); err != nil {
		return nil, err
	}
	return l, nil
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
	l.conn, l.addr, l.since = conn, conn.PgConn().Conn().RemoteAddr().String(), time.Now()
	return nil
}

// Next waits for the next notification on any of the Listener's channels.
// When the session is found lost, Next takes a new one from the Pool,
// LISTENs again and returns a *GapError (errors.Is ErrListenGap); while no
// host can take it, Next keeps trying, with the Pool's backoff, until ctx
// ends. Other errors: ctx's, and ErrClosed after Close or once the Pool is
// closed.
func (l *Listener) Next(ctx context.Context) (*pgconn.Notification, error) {
	if l.closed {
		return nil, ErrClosed
	}
	if l.conn == nil {
		return nil, l.regain(ctx)
	}
	n, err := l.conn.WaitForNotification(ctx)
	if err == nil {
		l.since = time.Now()
		return n, nil
	}
	if ctx.Err() != nil && !l.conn.IsClosed() {
		return nil, ctx.Err() // the session is still good
	}
	l.conn.Close(context.Background())
	l.conn, l.lost, l.cause = nil, time.Now(), err
	return nil, l.regain(ctx)
}

// regain takes a new session, issues the LISTENs and returns the
// *GapError that reports the loss, or the error that stopped it.
func (l *Listener) regain(ctx context.Context) error {
	cfg := l.pool.cfg
	since := l.since // connect moves it to the new session's LISTENs
	pause := cfg.BackoffInitial
	for {
		err := l.connect(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil || errors.Is(err, ErrClosed) {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		pause = min(2*pause, cfg.BackoffMax)
	}
	gap := &GapError{Since: since, Lost: l.lost, Regained: l.since, Addr: l.addr, Cause: l.cause}
	l.lost, l.cause = time.Time{}, nil
	return gap
}

// Close closes the Listener's session (which ends its LISTENs). It may be
// called again; it must not run alongside Next.
func (l *Listener) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	if l.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return l.conn.Close(ctx)
}
