package failover

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/netconn"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/internal/telemetry"
)

// connKey is where what the Pool keeps of each connection (connState)
// lives in pgconn's per-connection CustomData: one entry, so a call looks
// it up once.
const connKey = "pgfailover.conn"

// connState is what the Pool keeps of one connection: its socket peeker
// (nil when the socket cannot be peeked), the slab its calls' Row and
// Rows values come from, and the query of the QueryRow it is held for,
// until its Scan. host is the host of a connection of PgxPool's, which
// chooses it as it connects (connectChain), and nil for those of a
// host's own pools. standby marks a connection opened on a standby
// ahead of its promotion, and prepared the version of the waiting
// statements it prepared then (see standby.go).
type connState struct {
	peek     *netconn.Peeker
	slab     rowSlab
	row      row
	host     *hostPool
	standby  bool
	prepared uint64
}

// stateOf returns what the Pool keeps of pc, made on first use (a
// connection the Pool's AfterConnect has not seen has no peeker).
func stateOf(pc *pgconn.PgConn) *connState {
	cd := pc.CustomData()
	st, _ := cd[connKey].(*connState)
	if st == nil {
		st = new(connState)
		cd[connKey] = st
	}
	return st
}

// hostPool is the pgxpools of one host, and its probe.
type hostPool struct {
	addr string
	pool *pgxpool.Pool // the Pool's connections: the Pool's target only
	// reads holds the Reader's connections: read-only sessions
	// (default_transaction_read_only on), to a replica or the primary
	// alike. pool_min_conns does not apply to it.
	reads *pgxpool.Pool
	probe probe.Prober // used only by the host's probe loop (and NewWithConfig's first probe)
	// dial holds how this host is dialled: its Host, Port, TLSConfig and
	// Fallbacks (its TLS variants). It is shared with the probe and never
	// modified; PgxPool's connections copy its fields.
	dial *pgx.ConnConfig

	stopProbe context.CancelFunc // ends the probe loop; nil until it starts
	probeDone chan struct{}      // closed when the probe loop has returned
	probes    atomic.Int64       // probes sent, for Stat
	socks     netconn.Sockets    // every socket to the host, to cut when it stops answering
	server    telemetry.Server   // the host's attributes on metric points
	// opening says that connections to the host, a standby, are being
	// opened ahead of its promotion; readied is how many were opened for
	// the calls waiting now, and prepared the version of the waiting
	// statements they prepared (standby.go).
	opening  atomic.Bool
	readied  atomic.Int32
	prepared atomic.Uint64
}

// newHostPool builds the pgxpools of host h. No connection is made here
// (unless the user asked for pool_min_conns, which pgxpool opens in the
// background); every new connection checks the server's role, and every
// acquire checks that the connection has not been killed while it sat
// idle.
func (p *Pool) newHostPool(h Host) (*hostPool, error) {
	hp := &hostPool{addr: h.Addr(), probeDone: make(chan struct{}), server: telemetry.NewServer(h.Host, h.Port)}
	cfg := p.cfg.hostConfig(h)
	hp.dial = cfg.ConnConfig.Copy()
	hp.probe.Config = hp.dial
	hp.probe.BeforeConnect = cfg.BeforeConnect
	hp.probe.Socks = &hp.socks

	readCfg := cfg.Copy()
	readCfg.MinConns = 0
	readCfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"

	var err error
	hp.pool, err = p.buildPool(hp, cfg, p.cfg.Target, telemetry.PurposeCalls, func(conn *pgx.Conn) bool { return p.usable(hp, conn) })
	if err != nil {
		return nil, err
	}
	hp.reads, err = p.buildPool(hp, readCfg, hosthealth.TargetAny, telemetry.PurposeReads, func(conn *pgx.Conn) bool { return p.stillOpen(hp, conn) })
	if err != nil {
		hp.pool.Close()
		return nil, err
	}
	return hp, nil
}

// buildPool builds one pgxpool of host hp from cfg, for purpose: its
// connections go to servers in a role target accepts, and ok decides
// whether an idle one may be handed out.
func (p *Pool) buildPool(hp *hostPool, cfg *pgxpool.Config, target hosthealth.Target, purpose telemetry.Purpose, ok func(*pgx.Conn) bool) (*pgxpool.Pool, error) {
	// Only the probe dials a host that cannot take calls now. Callers that
	// were already waiting inside pgxpool's Acquire when the host went down
	// would otherwise each dial it once more, and pool_min_conns would keep
	// dialling a host in the wrong role.
	userBeforeConnect := cfg.BeforeConnect
	cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
		if !p.canTake(hp, target) && !(purpose == telemetry.PurposeCalls && openingStandby(ctx)) {
			return errHostNotUsable
		}
		if userBeforeConnect != nil {
			if err := userBeforeConnect(ctx, cc); err != nil {
				return err
			}
		}
		// cc is this connection's own copy: its sockets, and its cancel
		// requests, are counted as the host's.
		cc.DialFunc = p.noteRefusedDial(hp, hp.socks.DialFunc(cc.DialFunc, true))
		opened, since := p.telemetry.Connecting(hp.server, hp.addr, purpose), p.state.Epoch(hp.addr)
		cc.ValidateConnect = func(ctx context.Context, conn *pgconn.PgConn) error {
			if err := p.checkRole(ctx, hp, conn, target, since); err != nil {
				return err
			}
			opened()
			return nil
		}
		return nil
	}
	pool, err := p.newPgxPool(cfg, ok)
	if err != nil {
		return nil, &HostError{Addr: hp.addr, Err: err}
	}
	return pool, nil
}

// newPgxPool builds a pgxpool of the Pool's from cfg, whose BeforeConnect
// and ValidateConnect already say where its connections go: it installs
// the Pool's connection hooks (installConnHooks, with ok) and ties the
// pool's background connects to the Pool's life. Every pgxpool the Pool
// owns, a host's or PgxPool's, is built here. Creating one connects
// nothing.
func (p *Pool) newPgxPool(cfg *pgxpool.Config, ok func(*pgx.Conn) bool) (*pgxpool.Pool, error) {
	installConnHooks(cfg, ok)
	// The context only matters with pool_min_conns, whose connections
	// pgxpool opens in the background for as long as the pool lives.
	return pgxpool.NewWithConfig(p.life, cfg)
}

// close closes both of the host's pools, in parallel: each waits for its
// connections in use to come back.
func (h *hostPool) close() {
	var wg sync.WaitGroup
	wg.Go(h.pool.Close)
	h.reads.Close()
	wg.Wait()
}

// checkRole is the role check on connect: it records the role the server
// at h reports and refuses a connection in a role the target does not
// accept. It takes the place of pgconn's target_session_attrs check. A
// connection opened ahead of a promotion (openingStandby) is kept, and
// its role not recorded.
func (p *Pool) checkRole(ctx context.Context, h *hostPool, conn *pgconn.PgConn, target hosthealth.Target, since uint64) error {
	if p.state.Stale(h.addr, since) {
		// The host failed while this login was under way: the failure is
		// the newer news (a server shutting down ends its sessions over
		// several milliseconds, and a statement sent on this one could
		// meet the rest of it). The probe says when the host is back.
		return errFailedWhileConnecting
	}
	if openingStandby(ctx) {
		// Opened for the promotion of a server the probe counts read-only.
		// The probe, not this login, says when it takes writes: a primary
		// fenced read-only by its configuration reports in_hot_standby=off
		// too. The connection is kept for that moment (usable).
		stateOf(conn).standby = true
		return nil
	}
	role, err := serverRole(ctx, conn)
	if err != nil {
		return err
	}
	if p.observe(h, hoststate.Observation{Kind: hoststate.Answered, Role: role, Since: since}).Dropped {
		return errFailedWhileConnecting
	}
	if !target.Accepts(role) {
		return &hosthealth.RoleError{Addr: h.addr, Role: role, Target: target}
	}
	return nil
}

// installConnHooks wraps cfg's AfterConnect and PrepareConn with the
// Pool's: every new connection gets a socket peeker, and an idle
// connection is handed out only when ok says so. The user's hooks are
// called after the Pool's: AfterConnect, and PrepareConn or else the
// deprecated BeforeAcquire, which pgxpool would otherwise have honoured.
func installConnHooks(cfg *pgxpool.Config, ok func(*pgx.Conn) bool) {
	userAfterConnect := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		stateOf(conn.PgConn()).peek = netconn.NewPeeker(conn.PgConn().Conn())
		if userAfterConnect != nil {
			return userAfterConnect(ctx, conn)
		}
		return nil
	}

	userPrepare := cfg.PrepareConn
	//lint:ignore SA1019 a user's BeforeAcquire must keep working
	if userPrepare == nil && cfg.BeforeAcquire != nil {
		//lint:ignore SA1019 a user's BeforeAcquire must keep working
		before := cfg.BeforeAcquire
		userPrepare = func(ctx context.Context, conn *pgx.Conn) (bool, error) { return before(ctx, conn), nil }
	}
	cfg.PrepareConn = func(ctx context.Context, conn *pgx.Conn) (bool, error) {
		if !ok(conn) {
			// Destroyed; pgxpool tries another connection or dials anew.
			return false, nil
		}
		if userPrepare != nil {
			return userPrepare(ctx, conn)
		}
		return true, nil
	}
}

// errHostNotUsable is what a host's pool returns instead of dialling a host
// that cannot take calls now. The call moves on without counting an attempt.
var errHostNotUsable = errors.New("pgfailover: host cannot take calls now")

// errFailedWhileConnecting is what a host's pool returns for a connection
// whose login was under way when the host failed. The call moves on as
// for errHostNotUsable.
var errFailedWhileConnecting = fmt.Errorf("%w: it failed while this connection was being opened", errHostNotUsable)

// canTake reports whether host h can take calls for target now: it is
// Healthy or Unknown in the current routing state.
func (p *Pool) canTake(h *hostPool, target hosthealth.Target) bool {
	return p.state.Routes().Usable(h.addr, target)
}

// usable reports whether an idle connection of host h may be handed out.
// It runs on every acquire, so it does no I/O beyond one non-blocking peek
// at the socket: anything already waiting on an idle connection (a FATAL
// from a shutdown, an end-of-file, a role change after a promotion) means
// its state is uncertain, so it is discarded before a statement is sent on
// it. A connection whose server answered on it less than
// netconn.RecentRead ago is not peeked (see quiet).
//
// The role the server reports is looked at only where it can have left
// the target: a session's role changes only when its server is promoted,
// from standby to primary, so under a target that accepts the primary a
// connection accepted when it was opened stays acceptable. Those opened
// on a standby ahead of its promotion are handed out only once the
// routing state takes their host, and looked at until they report the
// primary then.
func (p *Pool) usable(h *hostPool, conn *pgx.Conn) bool {
	pc := conn.PgConn()
	return p.usableState(h, pc, stateOf(pc))
}

// usableState is usable for the connection pc, whose state is st.
func (p *Pool) usableState(h *hostPool, pc *pgconn.PgConn, st *connState) bool {
	if !p.stillOpenState(h, st) {
		return false
	}
	if !st.standby && p.cfg.Target.Accepts(hosthealth.RolePrimary) {
		return true
	}
	role := hosthealth.ReportedRole(pc.ParameterStatus("in_hot_standby"))
	if st.standby {
		// Opened on a standby for its promotion: handed out only where
		// standbyUsable says so, whatever the session reports.
		if !p.standbyUsable(h) {
			p.telemetry.Closed(h.server, telemetry.ClosedNotPromoted, 1)
			return false
		}
		if role == hosthealth.RolePrimary && p.canTake(h, p.cfg.Target) {
			// Told of its promotion, which the routing state has
			// seen too: in the target's role for good. (A fenced
			// primary reports the primary's role as well.)
			st.standby = false
		}
		return true
	}
	if role != hosthealth.RoleUnknown && !p.cfg.Target.Accepts(role) {
		// The server's role changed while this connection was open.
		p.telemetry.Closed(h.server, telemetry.ClosedWrongRole, 1)
		p.observe(h, hoststate.Observation{Kind: hoststate.Answered, Role: role, Since: p.state.Epoch(h.addr)})
		return false
	}
	return true
}

// stillOpen is quiet for an idle connection of host h, counting the
// connection closed when the server has ended its session.
func (p *Pool) stillOpen(h *hostPool, conn *pgx.Conn) bool {
	return p.stillOpenState(h, stateOf(conn.PgConn()))
}

// stillOpenState is stillOpen for the connection whose state is st.
func (p *Pool) stillOpenState(h *hostPool, st *connState) bool {
	if st.quiet() {
		return true
	}
	p.telemetry.Closed(h.server, telemetry.ClosedByServer, 1)
	return false
}

// quiet reports whether nothing is waiting on an idle connection's socket:
// the peek of usable, for connections that serve either role. The peek is
// skipped when the socket returned data less than netconn.RecentRead ago
// (PeekIdle): on a busy pool that is nearly every reuse, and only a FATAL
// sent in that moment can be waiting. The time is the socket's last read,
// not the connection's last release, so a connection that sat unused in
// a caller's hands (an Acquire, database/sql) before it was given back is
// peeked.
func (st *connState) quiet() bool {
	if pk := st.peek; pk != nil {
		switch pk.PeekIdle() {
		case netconn.PeekPending, netconn.PeekClosed:
			return false
		}
	}
	return true
}

// noteRefusedDial wraps dial so that a host that refuses or resets the
// connection is known to be down before pgxpool hands the connection's
// slot to the next caller waiting in its Acquire: told only once the error
// had come back up to the call, pgxpool let that caller dial the dead host
// too, and the one after it, for as long as the news took. A dial that
// timed out, or whose caller gave up, is left to the call to judge.
func (p *Pool) noteRefusedDial(hp *hostPool, dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil && ctx.Err() == nil && hosthealth.Classify(err) == hosthealth.Transport {
			p.observe(hp, hoststate.Observation{Kind: hoststate.Failed, Class: hosthealth.Transport})
		}
		return c, err
	}
}

// markFailed records a failover event of class on host h. A write refused
// by a read-only server makes the host a replica for the ranking, and
// closes its pooled connections. A role stated by the server when
// connecting was recorded then.
func (p *Pool) markFailed(h *hostPool, class hosthealth.Class, err error) {
	if _, ok := errors.AsType[*hosthealth.RoleError](err); ok && class == hosthealth.Topology {
		return
	}
	p.observe(h, hoststate.Observation{Kind: hoststate.Failed, Class: class})
	if class != hosthealth.Topology {
		p.steer.failed(h.addr, err)
	}
	p.refreshTopology()
}

// serverRole reads the role of the server at the other end of conn: from
// the in_hot_standby parameter the server reports (PostgreSQL 14 and
// later), else by asking.
func serverRole(ctx context.Context, conn *pgconn.PgConn) (hosthealth.Role, error) {
	if role := hosthealth.ReportedRole(conn.ParameterStatus("in_hot_standby")); role != hosthealth.RoleUnknown {
		return role, nil
	}
	res := conn.ExecParams(ctx, "SELECT pg_is_in_recovery()", nil, nil, nil, nil).Read()
	if res.Err != nil {
		return hosthealth.RoleUnknown, res.Err
	}
	return hosthealth.RecoveryRole(len(res.Rows) == 1 && len(res.Rows[0]) == 1 && string(res.Rows[0][0]) == "t"), nil
}
