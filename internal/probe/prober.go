package probe

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/netconn"
	"github.com/pgfailover/pgfailover/replica"
)

// probeSQL asks a server whether it is read-only, and for the zone it
// advertises (a placeholder setting in postgresql.conf; NULL where unset).
// It is one round trip on an open connection. The third column is the
// server's WAL position: on a primary the position of its last insert
// (every write it acknowledged lies at or before it, whatever the
// synchronous_commit), on a replica the position it has replayed to
// (NULL when it has replayed nothing). The fifth to seventh are what the
// Reader's outage rule needs (see failover.Reader): how far the server received
// WAL and whether it receives WAL now (ReceivedSQL, ReceivingSQL), and
// whether it replicates synchronously: a standby must flush a commit
// before it is acknowledged (synchronous_standby_names set,
// synchronous_commit on or remote_apply, as the probe's session sees
// them).
//
// A server is read-only when it is in recovery, or when its own
// configuration makes every transaction read-only (a primary fenced by its
// operator): such a server refuses writes just as a standby does, so it
// ranks as one. default_transaction_read_only set for the application's
// role or database is the application's choice and does not count; it
// shows in pg_settings with another source. The pg_settings scan runs only
// when the setting is on.
// The sources that fence a server are hosthealth.FencedBy's.
var probeSQL = `SELECT ` + probeColumns

// probeReadOnly is true where the server refuses writes (see probeSQL).
var probeReadOnly = `pg_is_in_recovery() OR (current_setting('default_transaction_read_only') = 'on' AND EXISTS (
	SELECT FROM pg_settings WHERE name = 'default_transaction_read_only'
	AND source IN ` + hosthealth.FencingSourcesSQL() + `))`

// probeColumns are probeSQL's answer: whether the server is read-only, its
// zone, its WAL position, its WAL block size, how far it received WAL,
// whether it receives WAL now, whether it replicates synchronously, and
// the server the connection reached (ServerSQL).
var probeColumns = probeReadOnly + `,
	current_setting('pgfailover.zone', true),
	` + WALSQL + `,
	current_setting('wal_block_size')::int,
	` + ReceivedSQL + `,
	` + ReceivingSQL + `,
	current_setting('synchronous_standby_names') <> '' AND current_setting('synchronous_commit') IN ('on', 'remote_apply'),
	` + ServerSQL

// The WAL a server holds, as probeSQL asks for it: WALSQL its position
// (how far it replayed, in recovery; else its insert position);
// ReceivedSQL how far it received WAL (NULL when it never streamed; its
// insert position out of recovery: all its WAL is its own);
// ReceivingSQL whether it receives WAL now: pg_stat_get_wal_receiver(),
// the function behind pg_stat_wal_receiver, returns a row only while the
// WAL receiver is connected to a sender, and its pid to any role. Called
// directly it costs the server less than the view, which runs it in a
// subquery; the three columns these add to a probe cost a standby 3-5 µs
// of CPU beside the 22-26 µs of the rest (measured here, back to back).
const (
	WALSQL       = `CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END`
	ReceivedSQL  = `CASE WHEN pg_is_in_recovery() THEN pg_last_wal_receive_lsn() ELSE pg_current_wal_insert_lsn() END`
	ReceivingSQL = `CASE WHEN pg_is_in_recovery() THEN (pg_stat_get_wal_receiver()).pid IS NOT NULL ELSE false END`
)

// ServerSQL names the server a connection reached, whatever name or
// forwarder led there: the address and port it accepted the connection
// on, as host:port (an IPv6 address in brackets). It is NULL on a Unix
// socket. Behind a name that moves (a cloud endpoint, a Kubernetes
// Service, a DNS name) it is how the Pool tells that the name leads to
// another server.
const ServerSQL = `CASE WHEN inet_server_addr() IS NULL THEN NULL
	WHEN family(inet_server_addr()) = 6 THEN '[' || host(inet_server_addr()) || ']:' || inet_server_port()
	ELSE host(inet_server_addr()) || ':' || inet_server_port() END`

// probeWidth is the number of probeColumns.
const probeWidth = 8

// watchSQL is probeSQL asked after a wait on the server: while the server
// stays read-only it sleeps $2 seconds at a time, $1 times at most, and it
// answers as soon as a check finds it writable (promoted, or its fence
// lifted). The aggregate completes before the outer columns are computed,
// so they describe the server after the wait. A check costs the server a
// timer wake-up of its backend, a small fraction of what a probe's round
// trip costs it (see probe.Schedule.Watch).
var watchSQL = `SELECT ` + probeColumns + `
	FROM (SELECT count(*) FROM generate_series(1, $1::int)
		WHERE CASE WHEN ` + probeReadOnly + ` THEN pg_sleep($2::float8) IS NULL END) AS watched`

// Prober keeps one connection to its host for health probes. Its users
// (NewWithConfig's first probe, then the host's probe loop, and whoever
// closes it) take turns through mu.
type Prober struct {
	Config        *pgx.ConnConfig
	BeforeConnect func(context.Context, *pgx.ConnConfig) error // the user's pool hook, if any
	Socks         *netconn.Sockets                             // the host's sockets
	// Lend, when set, lends the probe an idle connection of the host's
	// pools for one plain probe (see Loan); ok is false when none is
	// idle. The probe then closes its own: an idle Pool holds one
	// connection on each host it uses, not two.
	Lend func(ctx context.Context) (loan Loan, ok bool)

	// mu guards conn. It is held through a probe's I/O: the probe loop
	// and the closers are the only ones to wait for it, never a call.
	mu   sync.Mutex
	conn *pgconn.PgConn
	// holds mirrors conn != nil, for Holds to read without mu.
	holds atomic.Bool
	// unwatched says that the server refused a watch on this connection
	// (a statement_timeout shorter than the watch, a recovery conflict, a
	// server that is not PostgreSQL): it is polled until it reconnects.
	unwatched atomic.Bool
	// prepared holds the statements prepared on conn (see exec), and
	// unprepared says that the server refused to keep them: a pooler
	// between, say. Both are reset when the probe reconnects.
	prepared   [2]bool
	unprepared bool
}

// Loan is a connection of the host's pools lent to one probe: Prepared
// says which of the probe's statements it holds (kept with the
// connection), and Return gives it back, closed when the probe failed on
// it, so that its pool discards it.
type Loan struct {
	Conn     *pgconn.PgConn
	Prepared *[2]bool
	Return   func()
}

// Result is what one probe of one host found.
type Result struct {
	Role hosthealth.Role
	Zone string
	// WAL is the server's WAL position (see probeSQL), zero when unknown;
	// Asked is the time just before it was asked for.
	WAL   replica.LSN
	Asked time.Time
	// Received and Receiving are how far the server received WAL and
	// whether it receives WAL now; Sync whether it replicates
	// synchronously (see probeSQL).
	Received  replica.LSN
	Receiving bool
	Sync      bool
	// Server is the server the probe's connection reached (ServerSQL),
	// "" when it did not say.
	Server string
	Err    error
}

// Plan is how one probe is sent: whether it waits on the server (Watch),
// and whether it first gives up the probe's connection and opens another
// through the host's name (Fresh), so that a name that now leads to
// another server is followed there.
type Plan struct {
	Watch Watch
	Fresh bool
}

// Run asks the host under plan, connecting first when needed or when the
// plan asks for a fresh connection: connecting is bounded by
// connectTimeout, the question by answerTimeout, and a watch (see Watch)
// by its own length on top. A server that refuses the watch is asked
// again at once without one, and polled from then on. A plain probe (no
// watch, no fresh connection) is asked on a connection Lend lends when
// there is one. The time each question was asked is read on clk.
func (pr *Prober) Run(ctx context.Context, clk clock.Clock, connectTimeout, answerTimeout time.Duration, plan Plan) Result {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if plan.Fresh {
		pr.closeLocked()
	} else if plan.Watch.Checks == 0 && pr.Lend != nil {
		if loan, ok := pr.Lend(ctx); ok {
			pr.closeLocked()
			defer loan.Return()
			return pr.question(ctx, clk, answerTimeout, Watch{}, loan.Conn, loan.Prepared)
		}
	}
	if pr.conn == nil || pr.conn.IsClosed() {
		ctx, cancel := context.WithTimeout(ctx, connectTimeout)
		defer cancel()
		// Probes connect like the pool does, so credentials set by the
		// user's BeforeConnect hook (a rotating token) apply to them too.
		cfg := pr.Config.Copy()
		if pr.BeforeConnect != nil {
			if err := pr.BeforeConnect(ctx, cfg); err != nil {
				return Result{Err: err}
			}
		}
		cfg.DialFunc = pr.Socks.DialFunc(cfg.DialFunc, false)
		conn, err := pgconn.ConnectConfig(ctx, &cfg.Config)
		if err != nil {
			return Result{Err: err}
		}
		pr.conn = conn
		pr.holds.Store(true)
		pr.unwatched.Store(false)
		pr.prepared, pr.unprepared = [2]bool{}, false
	}
	res := pr.question(ctx, clk, answerTimeout, plan.Watch, pr.conn, &pr.prepared)
	if res.Err != nil {
		pr.closeLocked()
	}
	return res
}

// question asks the probe's question on conn, whose prepared statements
// prepared tracks, and reads the answer. A connection that failed is
// closed. Called with mu held.
func (pr *Prober) question(ctx context.Context, clk clock.Clock, answerTimeout time.Duration, watch Watch, conn *pgconn.PgConn, prepared *[2]bool) Result {
	asked := clk.Now()
	res := pr.ask(ctx, answerTimeout, watch, conn, prepared)
	if watch.Checks > 0 && refusedOnly(conn, res.Err) {
		pr.unwatched.Store(true)
		asked = clk.Now()
		res = pr.ask(ctx, answerTimeout, Watch{}, conn, prepared)
	}
	if res.Err == nil && (len(res.Rows) != 1 || len(res.Rows[0]) != probeWidth) {
		res.Err = errors.New("pgfailover: unexpected answer to the health probe")
	}
	if res.Err != nil {
		closeConn(conn)
		return Result{Err: res.Err}
	}
	row := res.Rows[0]
	wal, _ := replica.ParseLSN(string(row[2])) // NULL: nothing replayed yet, unknown
	if row[0][0] == 'f' {
		blockSize, _ := strconv.ParseUint(string(row[3]), 10, 32)
		wal = RecordEnd(wal, blockSize)
	}
	received, _ := replica.ParseLSN(string(row[4])) // NULL: never streamed, unknown
	// asked is when the question was sent, though a watch's answer
	// describes the server as it ended: for a primary's position, whose
	// time bounds the writes it covers, and for what a replica holds, the
	// earlier time is the safe one.
	return Result{
		Role: hosthealth.RecoveryRole(string(row[0]) == "t"), Zone: string(row[1]), WAL: wal, Asked: asked,
		Received: received, Receiving: string(row[5]) == "t", Sync: string(row[6]) == "t",
		Server: string(row[7]),
	}
}

// ask sends the probe's question on conn, with a watch when the plan has
// one: answerTimeout bounds the answer beyond the watch's own length.
// Called with mu held.
func (pr *Prober) ask(ctx context.Context, answerTimeout time.Duration, watch Watch, conn *pgconn.PgConn, prepared *[2]bool) *pgconn.Result {
	if watch.Checks == 0 {
		ctx, cancel := context.WithTimeout(ctx, answerTimeout)
		defer cancel()
		return pr.exec(ctx, stmtProbe, nil, conn, prepared)
	}
	ctx, cancel := context.WithTimeout(ctx, answerTimeout+watch.Length())
	defer cancel()
	args := [][]byte{
		strconv.AppendInt(nil, int64(watch.Checks), 10),
		strconv.AppendFloat(nil, watch.Step.Seconds(), 'f', 6, 64),
	}
	return pr.exec(ctx, stmtWatch, args, conn, prepared)
}

// The probe's statements, prepared on its connection under their names.
const (
	stmtProbe = iota
	stmtWatch
)

var probeStatements = [2]struct{ name, sql string }{
	stmtProbe: {"pgfailover_probe", probeSQL},
	stmtWatch: {"pgfailover_watch", watchSQL},
}

// exec runs statement stmt with args on conn. It is prepared once per
// connection (prepared): parsing and planning the probe's question cost
// the server more than the rest of answering it (about 250 µs of its
// 450 µs, measured here), and every instance asks every host once a
// second. A server that will not keep a prepared statement (one that
// refuses it, or a pooler that forgets it between two statements) is sent
// the unnamed one from then on. Called with mu held.
func (pr *Prober) exec(ctx context.Context, stmt int, args [][]byte, conn *pgconn.PgConn, prepared *[2]bool) *pgconn.Result {
	st := probeStatements[stmt]
	if !pr.unprepared && !prepared[stmt] {
		_, err := conn.Prepare(ctx, st.name, st.sql, nil)
		if err != nil && !refusedOnly(conn, err) {
			return &pgconn.Result{Err: err}
		}
		prepared[stmt], pr.unprepared = err == nil, err != nil
	}
	if prepared[stmt] && !pr.unprepared {
		res := conn.ExecPrepared(ctx, st.name, args, nil, nil).Read()
		if pgErr, ok := errors.AsType[*pgconn.PgError](res.Err); !ok || pgErr.Code != invalidStatementName || conn.IsClosed() {
			return res
		}
		pr.unprepared = true // forgotten: a pooler's other session
	}
	return conn.ExecParams(ctx, st.sql, args, nil, nil, nil).Read()
}

// invalidStatementName is the SQLSTATE of a prepared statement that does
// not exist.
const invalidStatementName = "26000"

// refusedOnly reports whether err is the server's refusal of a statement
// on conn, which stays open.
func refusedOnly(conn *pgconn.PgConn, err error) bool {
	_, ok := errors.AsType[*pgconn.PgError](err)
	return ok && !conn.IsClosed()
}

// RecordEnd turns the primary's insert position into the end of its last
// record, the form a replica's replay position takes. The two differ only
// when the insert position sits just past a WAL page's header (24 bytes,
// or 40 on the first page of a segment): the last record then ended at the
// page boundary, which is where a replica that replayed everything stands.
// Without this, a replica of an idle primary would never seem to have
// caught up.
func RecordEnd(insert replica.LSN, blockSize uint64) replica.LSN {
	if blockSize == 0 {
		return insert
	}
	switch off := uint64(insert) % blockSize; off {
	case shortPageHeader, longPageHeader:
		return insert - replica.LSN(off)
	}
	return insert
}

// The sizes of a WAL page's header: XLogPageHeaderData and, on the first
// page of a segment, XLogLongPageHeaderData.
const (
	shortPageHeader = 24
	longPageHeader  = 40
)

// Close closes the probe connection, if open. It may be called more than
// once.
func (pr *Prober) Close() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.closeLocked()
}

// closeLocked closes the probe's own connection (closeConn).
func (pr *Prober) closeLocked() {
	if pr.conn != nil {
		closeConn(pr.conn)
		pr.conn = nil
		pr.holds.Store(false)
	}
}

// Holds reports whether the probe holds a connection of its own.
func (pr *Prober) Holds() bool { return pr.holds.Load() }

// closeConn closes conn and waits, up to a second, for pgconn to finish
// with its socket, so that no goroutine of pgconn's outlives the probe.
// The probe's connection sends no cancel request, so when a timed-out
// question made pgconn give the connection up, that is quick.
func closeConn(conn *pgconn.PgConn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn.Close(ctx)
	select {
	case <-conn.CleanupDone():
	case <-ctx.Done():
	}
}

// Unwatched reports whether the server refused a watch on the probe's
// connection: it is polled until the probe reconnects.
func (pr *Prober) Unwatched() bool { return pr.unwatched.Load() }
