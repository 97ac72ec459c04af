package failover

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
)

// follower is the *pgxpool.Pool that PgxPool returns, and what it needs to
// be reset when a host its connections go to is demoted.
type follower struct {
	pool *pgxpool.Pool

	// mu guards hosts. No I/O while held (Reset only marks connections;
	// it closes idle ones in the background).
	mu sync.Mutex
	// hosts are the addresses the pool has connected to since its last
	// Reset: the hosts some of its connections may still point at.
	hosts map[string]bool
}

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
		return f.pool
	}
	p.followMu.Lock()
	defer p.followMu.Unlock()
	if f := p.follow.Load(); f != nil {
		return f.pool
	}
	f := p.newFollower(following{startCall: p.startCall, target: p.cfg.Target, ok: p.followerUsable})
	p.follow.Store(f)
	if p.closed.Load() {
		// Close may have looked for it before it existed.
		f.pool.Close()
	}
	return f.pool
}

// follower returns PgxPool's pool, nil if it was never asked for.
func (p *Pool) follower() *follower { return p.follow.Load() }

// following says where a following pool's connections go: startCall sets
// up the call that chooses the host of a new connection (the Pool's, or the
// Reader's), target is the roles its server may be in, and ok decides
// whether an idle connection may be handed out.
type following struct {
	startCall func(*call, context.Context)
	target    hosthealth.Target
	ok        func(*pgx.Conn) bool
	readOnly  bool // every session is read-only (default_transaction_read_only)
}

// newFollower builds a pool whose connections follow rt. Called with
// followMu held; creating a pgxpool connects nothing (pool_min_conns
// connects in the background).
func (p *Pool) newFollower(rt following) *follower {
	f := &follower{hosts: make(map[string]bool)}
	cfg := p.cfg.Config.Copy()
	cfg.ConnConfig.ValidateConnect = nil // set for each connection below
	if rt.readOnly {
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	userBeforeConnect := cfg.BeforeConnect
	cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
		// ctx carries the acquiring caller's values; pgxpool ends it only
		// when the pool closes, so the waits are bounded by the budget.
		// cc is this connection's own copy of the config: the chain points
		// it at the chosen host, and at the others should that one refuse.
		var c call
		rt.startCall(&c, ctx)
		c.connect = true
		if err := p.newConnectChain(&c, rt.target, f, cc); err != nil {
			return err
		}
		if userBeforeConnect != nil {
			return userBeforeConnect(ctx, cc)
		}
		return nil
	}
	pool, err := p.hosts.NewPgxPool(cfg, rt.ok)
	if err != nil {
		// pgxpool refuses only settings it checked already when each
		// host's pool was built from the same Config in NewWithConfig,
		// and PgxPool, like pgxpool's own accessors, returns no error.
		panic("pgfailover: PgxPool: " + err.Error())
	}
	f.pool = pool
	return f
}

// followerUsable reports whether an idle connection of PgxPool's may be
// handed out: usable as for a host's own pool, and its host still one the
// Pool would send a call to.
func (p *Pool) followerUsable(conn *pgx.Conn) bool {
	pc := conn.PgConn()
	st := hostpool.StateOf(pc)
	h := st.Host
	rs := p.state.Routes()
	return h != nil && rs.Holds(h.Addr, h) && p.hosts.Usable(h, pc, st) && rs.Usable(h.Addr, p.cfg.Target)
}

// connected records that the pool has a connection to addr.
func (f *follower) connected(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hosts[addr] = true
}

// demoted resets the pool when it may hold connections to addr, a host
// just found in a role the target does not accept. A nil follower (PgxPool
// never called) does nothing.
func (f *follower) demoted(addr string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.hosts[addr] {
		return
	}
	clear(f.hosts)
	f.pool.Reset()
}

// AcquireAllIdle acquires every idle connection of every host's pool, as
// pgxpool.Pool.AcquireAllIdle does for one: each passes the same checks as
// an acquired connection (the peek, the role), and those that fail are
// closed instead. Release each when done. It does not wait and does not
// fail over.
func (p *Pool) AcquireAllIdle(ctx context.Context) []*pgxpool.Conn {
	var conns []*pgxpool.Conn
	for _, h := range p.state.Routes().Table.List {
		conns = append(conns, h.Calls.AcquireAllIdle(ctx)...)
	}
	return conns
}
