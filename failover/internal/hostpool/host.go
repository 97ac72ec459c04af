package hostpool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/netconn"
	"github.com/pgfailover/pgfailover/internal/outcome"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/internal/telemetry"
)

// Host is the pgxpools of one host, and its probe.
type Host struct {
	Addr  string
	Calls *pgxpool.Pool // the Pool's own calls: the Pool's target only
	// Reads holds the Reader's connections: read-only sessions
	// (default_transaction_read_only on), to a replica or the primary
	// alike. pool_min_conns does not apply to it.
	Reads *pgxpool.Pool
	Probe probe.Prober // used only by the host's probe loop (and the first probe)
	// Dial holds how this host is dialled: its Host, Port, TLSConfig and
	// Fallbacks (its TLS variants). It is shared with the probe and never
	// modified; a following pool's connections copy its fields.
	Dial   *pgx.ConnConfig
	Probes atomic.Int64     // probes sent, for the Pool's Stat
	Socks  netconn.Sockets  // every socket to the host, to cut when it stops answering
	Server telemetry.Server // the host's attributes on metric points

	stopProbe context.CancelFunc            // ends the probe loop; nil until it starts
	probeDone chan struct{}                 // closed when the probe loop has returned
	hint      chan struct{}                 // wakes the probe loop (HintPrimary)
	nudge     chan struct{}                 // makes the probe loop look again at whether the host is in use
	epoch     atomic.Pointer[atomic.Uint32] // host state's epoch counter of the host, once read (Set.EpochOf)
	// opening says that connections to the host, a standby, are being
	// opened ahead of its promotion; readied is how many were opened for
	// the calls waiting now, and prepared the version of the waiting
	// statements they prepared (standby.go).
	opening  atomic.Bool
	readied  atomic.Int32
	prepared atomic.Uint64
}

// Close closes both of the host's pools, in parallel: each waits for
// its connections in use to come back.
func (h *Host) Close() {
	var wg sync.WaitGroup
	wg.Go(h.Calls.Close)
	h.Reads.Close()
	wg.Wait()
}

// openConns is the number of connections of the host's own pools.
func (h *Host) openConns() int {
	return int(h.Calls.Stat().TotalConns() + h.Reads.Stat().TotalConns())
}

// connKey is where what the package keeps of each connection (ConnState)
// lives in pgconn's per-connection CustomData.
const connKey = "pgfailover.conn"

// ConnState is what the package keeps of one connection: its socket
// peeker (nil when the socket cannot be peeked), and Host, the host of a
// connection of a following pool (PgxPool's or Reader.PgxPool's), which
// chooses it as it connects, nil for those of a host's own pools. standby marks a
// connection opened on a standby ahead of its promotion, and prepared the
// version of the waiting statements it prepared then (see standby.go).
type ConnState struct {
	Peek     *netconn.Peeker
	Host     *Host
	standby  bool
	prepared uint64
	// since is the host's epoch when the connection's login began: a role
	// its server reports on it later is news only while the host has not
	// failed since (hoststate's order).
	since hoststate.Epoch
	// probed says which of the probe's statements the connection holds,
	// once lent to the probe (lend).
	probed [2]bool
	// Server is the server a connection of the Reader's, or one opened
	// on a standby ahead of its promotion, reached, as it names itself
	// (probe.ServerSQL); "" when it did not say, and for the other
	// connections. Behind a name that spreads connections over several
	// servers (a reader endpoint), or moves, it tells whether what the
	// host's probe found describes this connection's server.
	Server string
}

// StateOf returns what the package keeps of pc, made on first use (a
// connection whose AfterConnect installConnHooks has not wrapped has no
// peeker).
func StateOf(pc *pgconn.PgConn) *ConnState {
	cd := pc.CustomData()
	st, _ := cd[connKey].(*ConnState)
	if st == nil {
		st = new(ConnState)
		cd[connKey] = st
	}
	return st
}

// NewHost builds the pgxpools of the host at host:port from cfg, whose
// ConnConfig dials that host alone (Dialing.For). No connection is made here (unless
// the user asked for pool_min_conns, which pgxpool opens in the
// background); every new connection checks the server's role, and every
// acquire checks that the connection has not been killed while it sat
// idle.
func (s *Set) NewHost(host string, port uint16, cfg *pgxpool.Config) (*Host, error) {
	addr := net.JoinHostPort(host, strconv.FormatUint(uint64(port), 10))
	h := &Host{Addr: addr, probeDone: make(chan struct{}), hint: make(chan struct{}, 1), nudge: make(chan struct{}, 1), Server: telemetry.NewServer(host, port)}
	h.Dial = cfg.ConnConfig.Copy()
	h.Probe.Config = h.Dial
	h.Probe.BeforeConnect = cfg.BeforeConnect
	h.Probe.Socks = &h.Socks
	h.Probe.Lend = func(ctx context.Context) (probe.Loan, bool) { return s.lend(ctx, h) }

	readCfg := cfg.Copy()
	readCfg.MinConns = 0
	readCfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"

	var err error
	h.Calls, err = s.buildPool(h, cfg, s.cfg.Target, telemetry.PurposeCalls, func(conn *pgx.Conn) bool { return s.reusable(h, conn) })
	if err != nil {
		return nil, err
	}
	h.Reads, err = s.buildPool(h, readCfg, hosthealth.TargetAny, telemetry.PurposeReads, func(conn *pgx.Conn) bool {
		return s.StillOpen(h, StateOf(conn.PgConn())) && s.stillReadOnly(h, conn.PgConn())
	})
	if err != nil {
		h.Calls.Close()
		return nil, err
	}
	return h, nil
}

// buildPool builds one pgxpool of host h from cfg, for purpose: its
// connections go to servers in a role target accepts, and ok decides
// whether an idle one may be handed out.
func (s *Set) buildPool(h *Host, cfg *pgxpool.Config, target hosthealth.Target, purpose telemetry.Purpose, ok func(*pgx.Conn) bool) (*pgxpool.Pool, error) {
	// Only the probe dials a host that cannot take calls now. Callers that
	// were already waiting inside pgxpool's Acquire when the host went down
	// would otherwise each dial it once more, and pool_min_conns would keep
	// dialling a host in the wrong role.
	userBeforeConnect := cfg.BeforeConnect
	cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
		if purpose == telemetry.PurposeReads && !s.readsUsed.Swap(true) {
			s.nudgeAll()
		}
		if !s.canTake(h, target) && !(purpose == telemetry.PurposeCalls && openingStandby(ctx)) {
			return ErrHostNotUsable
		}
		if userBeforeConnect != nil {
			if err := userBeforeConnect(ctx, cc); err != nil {
				return err
			}
		}
		// cc is this connection's own copy: its sockets, and its cancel
		// requests, are counted as the host's.
		cc.DialFunc = s.noteRefusedDial(h, h.Socks.DialFunc(cc.DialFunc, true))
		opened, since := s.cfg.Telemetry.Connecting(h.Server, h.Addr, purpose), s.EpochOf(h)
		cc.ValidateConnect = func(ctx context.Context, conn *pgconn.PgConn) error {
			if err := s.CheckRole(ctx, h, conn, target, since); err != nil {
				return err
			}
			if purpose == telemetry.PurposeReads {
				// The Reader judges each read by the server it reaches
				// (see ConnState.Server).
				if err := learnServer(ctx, conn); err != nil {
					return err
				}
			}
			opened()
			return nil
		}
		return nil
	}
	return s.NewPgxPool(cfg, ok)
}

// NewPgxPool builds a pgxpool from cfg, whose BeforeConnect and
// ValidateConnect already say where its connections go: it installs the
// connection hooks (installConnHooks, with ok) and ties the pool's
// background connects to the Set's life. Every pgxpool of the Pool's, a
// host's or a following pool, is built here. Creating one connects
// nothing.
func (s *Set) NewPgxPool(cfg *pgxpool.Config, ok func(*pgx.Conn) bool) (*pgxpool.Pool, error) {
	installConnHooks(cfg, ok)
	// The context only matters with pool_min_conns, whose connections
	// pgxpool opens in the background for as long as the pool lives.
	return pgxpool.NewWithConfig(s.cfg.Life, cfg)
}

// CheckRole is the role check on connect: it records the role the server
// at h reports and refuses a connection in a role the target does not
// accept. It takes the place of pgconn's target_session_attrs check.
// since is h's epoch when the connect began (hoststate.Owner.Epoch). A
// connection opened ahead of a promotion (openingStandby) is kept, and
// its role not recorded.
func (s *Set) CheckRole(ctx context.Context, h *Host, conn *pgconn.PgConn, target hosthealth.Target, since hoststate.Epoch) error {
	StateOf(conn).since = since
	if s.state.Stale(h.Addr, since) {
		// The host failed while this login was under way: the failure is
		// the newer news (a server shutting down ends its sessions over
		// several milliseconds, and a statement sent on this one could
		// meet the rest of it). The probe says when the host is back.
		return ErrFailedWhileConnecting
	}
	if openingStandby(ctx) {
		// Opened for the promotion of a server the probe counts read-only.
		// The probe, not this login, says when it takes writes: a primary
		// fenced read-only by its configuration reports in_hot_standby=off
		// too. The connection is kept for that moment (Reusable), on the
		// server it reached: behind a name that moves, the promotion the
		// probe sees may be another server's.
		StateOf(conn).standby = true
		return learnServer(ctx, conn)
	}
	return s.checkAnswer(ctx, h, conn, target, since)
}

// checkAnswer records the role the server at h reports on conn, a login
// that began at h's epoch since, and refuses a role target does not
// accept.
func (s *Set) checkAnswer(ctx context.Context, h *Host, conn *pgconn.PgConn, target hosthealth.Target, since hoststate.Epoch) error {
	role, err := serverRole(ctx, conn)
	if err != nil {
		return err
	}
	if s.Observe(h, hoststate.Observation{Kind: hoststate.Answered, Role: role, Since: since}).Dropped {
		return ErrFailedWhileConnecting
	}
	if !target.Accepts(role) {
		return &hosthealth.RoleError{Addr: h.Addr, Role: role, Target: target}
	}
	return nil
}

// installConnHooks wraps cfg's AfterConnect and PrepareConn with the
// package's: every new connection gets a socket peeker, and an idle
// connection is handed out only when ok says so. The user's hooks are
// called after these: AfterConnect, and PrepareConn or else the
// deprecated BeforeAcquire, which pgxpool would otherwise have honoured.
func installConnHooks(cfg *pgxpool.Config, ok func(*pgx.Conn) bool) {
	userAfterConnect := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		StateOf(conn.PgConn()).Peek = netconn.NewPeeker(conn.PgConn().Conn())
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
		if userPrepare != nil && ctx.Value(lendKey{}) == nil {
			return userPrepare(ctx, conn)
		}
		return true, nil
	}
}

// ErrHostNotUsable is what a host's pool returns instead of dialling a
// host that cannot take calls now. The call moves on without counting an
// attempt.
var ErrHostNotUsable = errors.New("pgfailover: host cannot take calls now")

// ErrFailedWhileConnecting is what a host's pool returns for a connection
// whose login was under way when the host failed. The call moves on as
// for ErrHostNotUsable.
var ErrFailedWhileConnecting = fmt.Errorf("%w: it failed while this connection was being opened", ErrHostNotUsable)

// canTake reports whether host h can take calls for target now: it is
// Healthy or Unknown in the current routing state.
func (s *Set) canTake(h *Host, target hosthealth.Target) bool {
	return s.state.Routes().Usable(h.Addr, target)
}

// reusable is Reusable for an idle connection of host h's calls pool.
func (s *Set) reusable(h *Host, conn *pgx.Conn) bool {
	pc := conn.PgConn()
	return s.Reusable(h, pc, StateOf(pc))
}

// Reusable reports whether an idle connection pc of host h, whose state is
// st, may be handed out for the Set's target. It runs on every acquire,
// so it does no I/O beyond one non-blocking peek at the socket: anything
// already waiting on an idle connection (a FATAL from a shutdown, an
// end-of-file, a role change after a promotion) means its state is
// uncertain, so it is discarded before a statement is sent on it. A
// connection whose server answered on it less than netconn.RecentRead ago
// is not peeked (see StillOpen).
//
// The role the server reports is looked at only where it can have left
// the target: a session's role changes only when its server is promoted,
// from standby to primary, so under a target that accepts the primary a
// connection accepted when it was opened stays acceptable. Those opened
// on a standby ahead of its promotion are handed out only once the
// routing state takes their host, and looked at until they report the
// primary then.
func (s *Set) Reusable(h *Host, pc *pgconn.PgConn, st *ConnState) bool {
	if !s.StillOpen(h, st) {
		return false
	}
	target := s.cfg.Target
	if !st.standby && target.Accepts(hosthealth.RolePrimary) {
		return true
	}
	role := hosthealth.ReportedRole(pc.ParameterStatus("in_hot_standby"))
	if st.standby {
		// Opened on a standby for its promotion: handed out only where
		// standbyUsable says so, whatever the session reports.
		if !s.standbyUsable(h) || !s.OnProbedServer(h, st) {
			s.cfg.Telemetry.Closed(h.Server, telemetry.ClosedNotPromoted, 1)
			return false
		}
		if role == hosthealth.RolePrimary && s.canTake(h, target) {
			// Told of its promotion, which the routing state has
			// seen too: in the target's role for good. (A fenced
			// primary reports the primary's role as well.)
			st.standby = false
		}
		return true
	}
	if role != hosthealth.RoleUnknown && !target.Accepts(role) {
		// The server's role changed while this connection was open.
		s.cfg.Telemetry.Closed(h.Server, telemetry.ClosedWrongRole, 1)
		s.Observe(h, hoststate.Observation{Kind: hoststate.Answered, Role: role, Since: st.since})
		return false
	}
	return true
}

// stillReadOnly reports whether a Reader session pc of host h still has
// default_transaction_read_only on, as it logged in: a statement sent
// through the Reader can turn it off (SET, SET SESSION CHARACTERISTICS),
// and the session is then closed rather than handed to the next read.
// PostgreSQL 14 and later report the setting on every change, so this
// costs no round trip; an older server does not, and its sessions are
// kept.
func (s *Set) stillReadOnly(h *Host, pc *pgconn.PgConn) bool {
	if pc.ParameterStatus("default_transaction_read_only") == "off" {
		s.cfg.Telemetry.Closed(h.Server, telemetry.ClosedReadWrite, 1)
		return false
	}
	return true
}

// OnProbedServer reports whether the connection whose state is st reached
// the server host h's probe last reached, or either is not known.
func (s *Set) OnProbedServer(h *Host, st *ConnState) bool {
	if st.Server == "" {
		return true
	}
	hs, ok := s.state.Routes().Status(h.Addr)
	return !ok || hs.Server == "" || hs.Server == st.Server
}

// StillOpen reports whether nothing is waiting on the socket of an idle
// connection of host h, whose state is st, counting the connection closed
// when the server has ended its session: the peek of Reusable, for
// connections that serve either role. The peek is skipped when the socket
// returned data less than netconn.RecentRead ago (PeekIdle): on a busy
// pool that is nearly every reuse, and only a FATAL sent in that moment
// can be waiting. The time is the socket's last read, not the
// connection's last release, so a connection that sat unused in a
// caller's hands (an Acquire, database/sql) before it was given back is
// peeked.
func (s *Set) StillOpen(h *Host, st *ConnState) bool {
	if pk := st.Peek; pk != nil {
		switch pk.PeekIdle() {
		case netconn.PeekPending, netconn.PeekClosed:
			s.cfg.Telemetry.Closed(h.Server, telemetry.ClosedByServer, 1)
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
func (s *Set) noteRefusedDial(h *Host, dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		since := s.EpochOf(h)
		c, err := dial(ctx, network, addr)
		if err != nil && !outcome.CallerDone(ctx) && hosthealth.Classify(err) == hosthealth.Transport {
			s.MarkFailed(h, since, hosthealth.Transport, err)
		}
		return c, err
	}
}

// tryConnect opens one connection to h, within timeout, checks the
// server's role against the Set's target (recording it), and closes it.
func (s *Set) tryConnect(ctx context.Context, h *Host, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cfg := h.Dial.Copy()
	if h.Probe.BeforeConnect != nil {
		if err := h.Probe.BeforeConnect(ctx, cfg); err != nil {
			return err
		}
	}
	cfg.DialFunc = h.Socks.DialFunc(cfg.DialFunc, false)
	since := s.EpochOf(h)
	conn, err := pgconn.ConnectConfig(ctx, &cfg.Config)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return s.checkAnswer(ctx, h, conn, s.cfg.Target, since)
}

// serverSQL asks a server which it is (probe.ServerSQL).
const serverSQL = "SELECT " + probe.ServerSQL

// learnServer asks the server at the other end of conn which it is, and
// keeps the answer in its ConnState: one round trip, at login.
func learnServer(ctx context.Context, conn *pgconn.PgConn) error {
	res := conn.ExecParams(ctx, serverSQL, nil, nil, nil, nil).Read()
	if res.Err != nil {
		return res.Err
	}
	if len(res.Rows) == 1 && len(res.Rows[0]) == 1 {
		StateOf(conn).Server = string(res.Rows[0][0])
	}
	return nil
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
