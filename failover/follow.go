package failover

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover/internal/follow"
	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
)

// PgxPool returns a genuine *pgxpool.Pool whose new connections go to the
// best host for the Pool's target (the current primary, for the default
// target), chosen from the same host table and health as the Pool's own
// calls. It is for libraries that need the concrete type:
// stdlib.OpenDBFromPool (see failover/stdlib), River's riverpgxv5.New,
// otelpgx.RecordStats, pgxpoolprometheus.
//
// It fails over at the connection level only:
//
//   - each new connection is dialled to the best usable host, and refused
//     unless the server is in a role the target accepts (the same role
//     check as the Pool's); while no host can take a connection, the
//     connect waits for one, as the Pool's calls do, up to
//     failover_max_duration, and then fails with the Pool's
//     *FailoverError (ErrNoHost when every host is in the wrong role,
//     ErrBudgetExhausted otherwise);
//   - a connect its host refuses before the session is ready (the dial
//     fails; the server is starting up, shutting down or full; it is in
//     the wrong role) goes on to the next host that can take it, or to the
//     same one after a backoff, within failover_max_attempts and
//     failover_max_duration; a connect that fails in
//     the end returns pgconn's connect error, with one line per attempt
//     and the Pool's *FailoverError among its causes;
//   - an idle connection is handed out only when a non-blocking peek finds
//     nothing waiting on it (no FATAL, no end-of-file; skipped when its
//     socket read an answer less than 50µs before), its server
//     has not reported a role the target refuses, and the Pool still ranks
//     its host usable for the target;
//   - when a host it has connected to is found demoted, the pool is Reset:
//     its idle connections close at once, those in use when released.
//
// Nothing is replayed: a statement whose connection fails returns pgx's
// own error, exactly as a plain pgxpool would, and a write cut in flight
// is not reported as ErrCommitOutcomeUnknown. Use the Pool's own methods
// for statement-level failover. For database/sql, use failover/stdlib
// rather than pgx's stdlib.OpenDBFromPool on this pool: pgx's stdlib turns
// a connection closed in the middle of a statement into driver.ErrBadConn,
// and database/sql then runs the statement again, a write included.
//
// The pool is built on first use, once, from the Pool's Config (pool_*
// settings and hooks as for each host's pool; its MaxConns is its own, on
// top of the host pools'). Its connections are not in the Pool's Stat: see
// its own Stat. Close the Pool, not this pool: Pool.Close closes it and
// waits for its connections to be released. After Close it returns a
// closed pool.
func (p *Pool) PgxPool() *pgxpool.Pool {
	if f := p.follow.Load(); f != nil {
		return f.PgxPool
	}
	p.followMu.Lock()
	defer p.followMu.Unlock()
	if f := p.follow.Load(); f != nil {
		return f.PgxPool
	}
	f := p.newFollower(false, p.cfg.Target, p.followerUsable)
	p.follow.Store(f)
	if p.eng.Closed() {
		// Close may have looked for it before it existed.
		f.PgxPool.Close()
	}
	return f.PgxPool
}

// follower returns PgxPool's pool, nil if it was never asked for.
func (p *Pool) follower() *follow.Pool { return p.follow.Load() }

// newFollower builds a pool whose connections go to hosts in a role
// target accepts, each connect walked by a call of the Pool's, or with
// reads one of the Reader's, in read-only sessions (Engine.ConnectWalk);
// ok decides whether an idle connection may be handed out. Called with
// followMu held; creating a pgxpool connects nothing (pool_min_conns
// connects in the background).
func (p *Pool) newFollower(reads bool, target hosthealth.Target, ok func(*pgx.Conn) bool) *follow.Pool {
	f, err := follow.New(follow.Config{
		Set:      p.eng.Hosts,
		Base:     p.cfg.Config,
		Target:   target,
		ReadOnly: reads,
		Rounds:   p.cfg.MaxAttempts,
		OK:       ok,
		Start: func(ctx context.Context) follow.Walk {
			// ctx carries the acquiring caller's values; pgxpool ends it
			// only when the pool closes, so the waits are bounded by the
			// budget.
			return p.eng.ConnectWalk(ctx, reads)
		},
	})
	if err != nil {
		// pgxpool refuses only settings it checked already when each
		// host's pool was built from the same Config in NewWithConfig,
		// and PgxPool, like pgxpool's own accessors, returns no error.
		panic("pgfailover: PgxPool: " + err.Error())
	}
	return f
}

// followerUsable reports whether an idle connection of PgxPool's may be
// handed out: usable as for a host's own pool, and its host still one the
// Pool would send a call to.
func (p *Pool) followerUsable(conn *pgx.Conn) bool {
	pc := conn.PgConn()
	st := hostpool.StateOf(pc)
	h := st.Host
	rs := p.eng.State.Routes()
	return h != nil && rs.Holds(h.Addr, h) && p.eng.Hosts.Reusable(h, pc, st) && rs.Usable(h.Addr, p.cfg.Target)
}

// AcquireAllIdle acquires every idle connection of every host's pool of
// the Pool's own calls (not the Reader's, nor PgxPool's), as
// pgxpool.Pool.AcquireAllIdle does for one: each passes the same checks as
// an acquired connection (the peek, the role), and those that fail are
// closed instead. Release each when done. It does not wait and does not
// fail over.
func (p *Pool) AcquireAllIdle(ctx context.Context) []*pgxpool.Conn {
	var conns []*pgxpool.Conn
	for _, h := range p.eng.State.Routes().Table.List {
		conns = append(conns, h.Calls.AcquireAllIdle(ctx)...)
	}
	return conns
}
