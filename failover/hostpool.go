package failover

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/sockpeek"
)

// peekKey is where a connection's socket peeker lives in pgconn's
// per-connection CustomData.
const peekKey = "pgfailover.peek"

// hostPool is the pgxpool of one host.
type hostPool struct {
	addr  string
	pool  *pgxpool.Pool
	probe prober // the host's background probe connection
}

// newHostPool builds host i's pgxpool. No connection is made here (unless
// the user asked for pool_min_conns); every new connection checks the
// server's role, and every acquire checks that the connection has not been
// killed while it sat idle.
func (p *Pool) newHostPool(ctx context.Context, i int) (*hostPool, error) {
	h := &hostPool{addr: p.cfg.Hosts[i].Addr()}
	cfg := p.cfg.hostPoolConfig(i)
	h.probe.config = cfg.ConnConfig.Copy()
	h.probe.beforeConnect = cfg.BeforeConnect

	cfg.ConnConfig.ValidateConnect = func(ctx context.Context, conn *pgconn.PgConn) error {
		role, err := serverRole(ctx, conn)
		if err != nil {
			return err
		}
		p.tracker.ObserveConnect(i, role)
		if !p.cfg.Target.Accepts(role) {
			return &hosthealth.RoleError{Addr: h.addr, Role: role, Target: p.cfg.Target}
		}
		return nil
	}

	userAfterConnect := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		conn.PgConn().CustomData()[peekKey] = sockpeek.New(conn.PgConn().Conn())
		if userAfterConnect != nil {
			return userAfterConnect(ctx, conn)
		}
		return nil
	}

	// Our PrepareConn takes the place of the user's hooks, so it calls
	// them: PrepareConn, or else the deprecated BeforeAcquire, which
	// pgxpool would otherwise have honoured.
	userPrepare := cfg.PrepareConn
	//lint:ignore SA1019 a user's BeforeAcquire must keep working
	if userPrepare == nil && cfg.BeforeAcquire != nil {
		//lint:ignore SA1019 a user's BeforeAcquire must keep working
		before := cfg.BeforeAcquire
		userPrepare = func(ctx context.Context, conn *pgx.Conn) (bool, error) { return before(ctx, conn), nil }
	}
	cfg.PrepareConn = func(ctx context.Context, conn *pgx.Conn) (bool, error) {
		if !p.usable(i, conn) {
			// Destroyed; pgxpool tries another connection or dials anew.
			return false, nil
		}
		if userPrepare != nil {
			return userPrepare(ctx, conn)
		}
		return true, nil
	}

	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, &HostError{Addr: h.addr, Err: err}
	}
	h.pool = pool
	return h, nil
}

// usable reports whether an idle connection of host i may be handed out.
// It runs on every acquire, so it does no I/O beyond one non-blocking peek
// at the socket: anything already waiting on an idle connection (a FATAL
// from a shutdown, an end-of-file, a role change after a promotion) means
// its state is uncertain, so it is discarded before a statement is sent on
// it.
func (p *Pool) usable(i int, conn *pgx.Conn) bool {
	pc := conn.PgConn()
	if pk, _ := pc.CustomData()[peekKey].(*sockpeek.Peeker); pk != nil {
		switch pk.Peek() {
		case sockpeek.Pending, sockpeek.Closed:
			return false
		}
	}
	if pc.ParameterStatus("in_hot_standby") == "on" && !p.cfg.Target.Accepts(hosthealth.RoleReplica) {
		// The server was demoted while this connection was open.
		p.markFailed(i, hosthealth.Topology)
		return false
	}
	return true
}

// markFailed records a failover event on host i. A host found in the wrong
// role loses its pooled connections so that no caller keeps writing to a
// demoted primary.
func (p *Pool) markFailed(i int, class hosthealth.Class) {
	p.tracker.ObserveFailure(i, class)
	if class == hosthealth.Topology {
		p.hosts[i].pool.Reset()
	}
}

// serverRole reads the role of the server at the other end of conn: from
// the in_hot_standby parameter the server reports (PostgreSQL 14 and
// later), else by asking.
func serverRole(ctx context.Context, conn *pgconn.PgConn) (hosthealth.Role, error) {
	switch conn.ParameterStatus("in_hot_standby") {
	case "on":
		return hosthealth.RoleReplica, nil
	case "off":
		return hosthealth.RolePrimary, nil
	}
	res := conn.ExecParams(ctx, "SELECT pg_is_in_recovery()", nil, nil, nil, nil).Read()
	if res.Err != nil {
		return hosthealth.RoleUnknown, res.Err
	}
	if len(res.Rows) == 1 && len(res.Rows[0]) == 1 && string(res.Rows[0][0]) == "t" {
		return hosthealth.RoleReplica, nil
	}
	return hosthealth.RolePrimary, nil
}

func (h *hostPool) close() {
	h.probe.close()
	if h.pool != nil {
		h.pool.Close()
	}
}
