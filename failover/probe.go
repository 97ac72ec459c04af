package failover

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/netconn"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/replica"
)

// probeSQL asks a server whether it is read-only, and for the zone it
// advertises (a placeholder setting in postgresql.conf; NULL where unset).
// It is one round trip on an open connection. The third column is the
// server's WAL position: on a primary the position of its last insert
// (every write it acknowledged lies at or before it, whatever the
// synchronous_commit), on a replica the position it has replayed to
// (NULL when it has replayed nothing). The last three are what the
// Reader's outage rule needs (see Reader): how far the server received
// WAL and whether it receives WAL now (receivedSQL, receivingSQL), and
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
// whether it receives WAL now, and whether it replicates synchronously.
var probeColumns = probeReadOnly + `,
	current_setting('pgfailover.zone', true),
	` + walSQL + `,
	current_setting('wal_block_size')::int,
	` + receivedSQL + `,
	` + receivingSQL + `,
	current_setting('synchronous_standby_names') <> '' AND current_setting('synchronous_commit') IN ('on', 'remote_apply')`

// The WAL a server holds, as probeSQL asks for it: walSQL its position
// (how far it replayed, in recovery; else its insert position);
// receivedSQL how far it received WAL (NULL when it never streamed; its
// insert position out of recovery: all its WAL is its own);
// receivingSQL whether it receives WAL now: pg_stat_get_wal_receiver(),
// the function behind pg_stat_wal_receiver, returns a row only while the
// WAL receiver is connected to a sender, and its pid to any role. Called
// directly it costs the server less than the view, which runs it in a
// subquery; the three columns these add to a probe cost a standby 3-5 µs
// of CPU beside the 22-26 µs of the rest (measured here, back to back).
const (
	walSQL       = `CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END`
	receivedSQL  = `CASE WHEN pg_is_in_recovery() THEN pg_last_wal_receive_lsn() ELSE pg_current_wal_insert_lsn() END`
	receivingSQL = `CASE WHEN pg_is_in_recovery() THEN (pg_stat_get_wal_receiver()).pid IS NOT NULL ELSE false END`
)

// probeWidth is the number of probeColumns.
const probeWidth = 7

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

// prober keeps one connection to its host for health probes. Its users
// (NewWithConfig's first probe, then the host's probe loop, and whoever
// closes it) take turns through mu.
type prober struct {
	config        *pgx.ConnConfig
	beforeConnect func(context.Context, *pgx.ConnConfig) error // the user's pool hook, if any
	socks         *netconn.Sockets                             // the host's sockets

	// mu guards conn. It is held through a probe's I/O: the probe loop
	// and the closers are the only ones to wait for it, never a call.
	mu   sync.Mutex
	conn *pgconn.PgConn
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

// probeResult is what one probe of one host found.
type probeResult struct {
	role hosthealth.Role
	zone string
	// wal is the server's WAL position (see probeSQL), zero when unknown;
	// asked is the time just before it was asked for.
	wal   replica.LSN
	asked time.Time
	// received and receiving are how far the server received WAL and
	// whether it receives WAL now; sync whether it replicates
	// synchronously (see probeSQL).
	received  replica.LSN
	receiving bool
	sync      bool
	err       error
	since     uint64 // the host's epoch when the probe began (hostPool.epoch)
}

// run asks the host, connecting first when needed: connecting is bounded
// by connectTimeout, the question by answerTimeout, and a watch (see
// probe.Watch) by its own length on top. A server that refuses the watch is
// asked again at once without one, and polled from then on.
func (pr *prober) run(ctx context.Context, now func() time.Time, connectTimeout, answerTimeout time.Duration, watch probe.Watch) probeResult {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.conn == nil || pr.conn.IsClosed() {
		ctx, cancel := context.WithTimeout(ctx, connectTimeout)
		defer cancel()
		// Probes connect like the pool does, so credentials set by the
		// user's BeforeConnect hook (a rotating token) apply to them too.
		cfg := pr.config.Copy()
		if pr.beforeConnect != nil {
			if err := pr.beforeConnect(ctx, cfg); err != nil {
				return probeResult{err: err}
			}
		}
		cfg.DialFunc = pr.socks.DialFunc(cfg.DialFunc, false)
		conn, err := pgconn.ConnectConfig(ctx, &cfg.Config)
		if err != nil {
			return probeResult{err: err}
		}
		pr.conn = conn
		pr.unwatched.Store(false)
		pr.prepared, pr.unprepared = [2]bool{}, false
	}
	asked := now()
	res := pr.ask(ctx, answerTimeout, watch)
	if watch.Checks > 0 && pr.refusedOnly(res.Err) {
		pr.unwatched.Store(true)
		asked = now()
		res = pr.ask(ctx, answerTimeout, probe.Watch{})
	}
	if res.Err == nil && (len(res.Rows) != 1 || len(res.Rows[0]) != probeWidth) {
		res.Err = errors.New("pgfailover: unexpected answer to the health probe")
	}
	if res.Err != nil {
		pr.closeLocked()
		return probeResult{err: res.Err}
	}
	row := res.Rows[0]
	wal, _ := replica.ParseLSN(string(row[2])) // NULL: nothing replayed yet, unknown
	if row[0][0] == 'f' {
		blockSize, _ := strconv.ParseUint(string(row[3]), 10, 32)
		wal = recordEnd(wal, blockSize)
	}
	received, _ := replica.ParseLSN(string(row[4])) // NULL: never streamed, unknown
	// asked is when the question was sent, though a watch's answer
	// describes the server as it ended: for a primary's position, whose
	// time bounds the writes it covers, and for what a replica holds, the
	// earlier time is the safe one.
	return probeResult{
		role: hosthealth.RecoveryRole(string(row[0]) == "t"), zone: string(row[1]), wal: wal, asked: asked,
		received: received, receiving: string(row[5]) == "t", sync: string(row[6]) == "t",
	}
}

// ask sends the probe's question on pr.conn, with a watch when the plan
// has one: answerTimeout bounds the answer beyond the watch's own length.
// Called with mu held.
func (pr *prober) ask(ctx context.Context, answerTimeout time.Duration, watch probe.Watch) *pgconn.Result {
	if watch.Checks == 0 {
		ctx, cancel := context.WithTimeout(ctx, answerTimeout)
		defer cancel()
		return pr.exec(ctx, stmtProbe, nil)
	}
	ctx, cancel := context.WithTimeout(ctx, answerTimeout+watch.Length())
	defer cancel()
	args := [][]byte{
		strconv.AppendInt(nil, int64(watch.Checks), 10),
		strconv.AppendFloat(nil, watch.Step.Seconds(), 'f', 6, 64),
	}
	return pr.exec(ctx, stmtWatch, args)
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

// exec runs statement stmt with args on pr.conn. It is prepared once per
// connection: parsing and planning the probe's question cost the server
// more than the rest of answering it (about 250 µs of its 450 µs, measured
// here), and every instance asks every host once a second. A server that
// will not keep a prepared statement (one that refuses it, or a pooler
// that forgets it between two statements) is sent the unnamed one from
// then on. Called with mu held.
func (pr *prober) exec(ctx context.Context, stmt int, args [][]byte) *pgconn.Result {
	st := probeStatements[stmt]
	if !pr.unprepared && !pr.prepared[stmt] {
		_, err := pr.conn.Prepare(ctx, st.name, st.sql, nil)
		if err != nil && !pr.refusedOnly(err) {
			return &pgconn.Result{Err: err}
		}
		pr.prepared[stmt], pr.unprepared = err == nil, err != nil
	}
	if pr.prepared[stmt] && !pr.unprepared {
		res := pr.conn.ExecPrepared(ctx, st.name, args, nil, nil).Read()
		if pgErr, ok := errors.AsType[*pgconn.PgError](res.Err); !ok || pgErr.Code != invalidStatementName || pr.conn.IsClosed() {
			return res
		}
		pr.unprepared = true // forgotten: a pooler's other session
	}
	return pr.conn.ExecParams(ctx, st.sql, args, nil, nil, nil).Read()
}

// invalidStatementName is the SQLSTATE of a prepared statement that does
// not exist.
const invalidStatementName = "26000"

// refusedOnly reports whether err is the server's refusal of a statement
// on a connection that stays open.
func (pr *prober) refusedOnly(err error) bool {
	_, ok := errors.AsType[*pgconn.PgError](err)
	return ok && !pr.conn.IsClosed()
}

// recordEnd turns the primary's insert position into the end of its last
// record, the form a replica's replay position takes. The two differ only
// when the insert position sits just past a WAL page's header (24 bytes,
// or 40 on the first page of a segment): the last record then ended at the
// page boundary, which is where a replica that replayed everything stands.
// Without this, a replica of an idle primary would never seem to have
// caught up.
func recordEnd(insert replica.LSN, blockSize uint64) replica.LSN {
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

// close closes the probe connection, if open. It may be called more than
// once.
func (pr *prober) close() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.closeLocked()
}

// closeLocked closes the connection and waits, up to a second, for pgconn
// to finish with its socket, so that no goroutine of pgconn's outlives the
// probe. The probe's connection sends no cancel request, so when a
// timed-out question made pgconn give the connection up, that is quick.
func (pr *prober) closeLocked() {
	if pr.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		pr.conn.Close(ctx)
		select {
		case <-pr.conn.CleanupDone():
		case <-ctx.Done():
		}
		pr.conn = nil
	}
}

// probeTimeout bounds a probe's connect (and New's wait for the topology
// source's first report): connect_timeout, or, when connect_timeout is 0
// (no limit for the Pool's connections), the bound ParseConfig set, since
// a probe must never hang.
func (p *Pool) probeTimeout() time.Duration {
	if t := p.cfg.ConnConfig.ConnectTimeout; t > 0 {
		return t
	}
	return p.cfg.probeConnectTimeout
}

// probeAll probes every host and records what it finds. It fails with
// ErrNoHost, listing every host's outcome, when no host is reachable in a
// role the target accepts.
//
// Credentials hold cluster-wide, as pgx assumes when it stops at the first
// 28P01, so they are tried on one host at a time until a server has
// settled them: the hosts are probed in order, each alone, until one logs
// in (then the rest are probed in parallel) or refuses the credentials
// (then New returns that refusal, and no other host sees the password). A
// host that cannot be reached settles nothing and passes the turn at once;
// one whose server has sent nothing after firstProbeLead passes it, and is
// still waited for. One whose server has spoken keeps the turn until its
// probe ends, however loaded the server or the client: a slow login is
// not a host that is gone.
func (p *Pool) probeAll(ctx context.Context) error {
	hosts := p.routes.Load().table.list
	if len(hosts) == 0 {
		return &FailoverError{Kind: ErrNoHost}
	}
	results := make([]probeResult, len(hosts))
	done := make(chan int, len(hosts))
	var wg sync.WaitGroup
	probe := func(i int) {
		hosts[i].probes.Add(1)
		wg.Go(func() {
			results[i] = p.probeOnce(ctx, hosts[i], probe.Watch{})
			done <- i
		})
	}
	next := 0
	for settled := false; !settled && next < len(hosts); {
		probe(next)
		next++
		t := p.clock.NewTimer(firstProbeLead)
	turn:
		for {
			select {
			case i := <-done:
				switch {
				case results[i].err == nil:
					settled = true
				case hosthealth.Classify(results[i].err) == hosthealth.Terminal:
					t.Stop()
					wg.Wait()
					for j := range next {
						p.probed(hosts[j], results[j])
					}
					return &HostError{Addr: hosts[i].addr, Err: results[i].err}
				case i != next-1:
					// An earlier host, whose turn had passed, settled
					// nothing: the current one keeps its turn.
					continue
				}
				// Settled, or the current host settled nothing (it could
				// not be reached): the turn ends.
				break turn
			case <-t.C():
				if !hosts[next-1].socks.Answered() {
					break turn
				}
				// The server speaks: it is slow, not gone, and will
				// settle the credentials within the probe's timeout.
				t = p.clock.NewTimer(firstProbeLead)
			}
		}
		t.Stop()
	}
	for ; next < len(hosts); next++ {
		probe(next)
	}
	wg.Wait()

	fe := &FailoverError{Kind: ErrNoHost}
	var terminal *HostError
	usable := false
	for i, r := range results {
		h := hosts[i]
		p.probed(h, r)
		switch {
		case r.err != nil:
			fe.Hosts = append(fe.Hosts, HostError{Addr: h.addr, Err: r.err})
			if terminal == nil && hosthealth.Classify(r.err) == hosthealth.Terminal {
				terminal = &HostError{Addr: h.addr, Err: r.err}
			}
		case !p.cfg.Target.Accepts(r.role):
			fe.Hosts = append(fe.Hosts, HostError{Addr: h.addr, Err: &hosthealth.RoleError{Addr: h.addr, Role: r.role, Target: p.cfg.Target}})
		default:
			usable = true
		}
	}
	switch {
	case usable:
		return nil
	case terminal != nil:
		// A bad password or database says more than "no host".
		return terminal
	}
	if err := ctx.Err(); err != nil {
		fe.Cause = err
	}
	return fe
}

// firstProbeLead is how long New waits for the server of a host whose
// probe has not ended to send something before it hands the turn to the
// next host.
const firstProbeLead = 500 * time.Millisecond

// probeOnce runs one probe of host h. Its result carries the host's epoch
// as the probe began, so that an answer that arrives after a newer failure
// is not taken for news (probed).
func (p *Pool) probeOnce(ctx context.Context, h *hostPool, watch probe.Watch) probeResult {
	since := h.epoch()
	r := h.probe.run(ctx, p.clock.Now, p.probeTimeout(), p.cfg.HealthProbeTimeout, watch)
	r.since = since
	return r
}

// probed records a probe's outcome on host h. An answer to a probe that
// began before the host's latest failure says nothing of the host now (a
// server shutting down can answer a question it was already asked): it is
// dropped, and the next probe asks again.
func (p *Pool) probed(h *hostPool, r probeResult) {
	p.telemetry.probed(h, r.err)
	if r.err == nil && h.stale(r.since) {
		return
	}
	before, _ := p.status(h.addr)
	if r.err != nil {
		if class := hosthealth.Classify(r.err); class != hosthealth.NotFailover {
			p.observeFailure(h, class)
		}
		if hosthealth.Unanswered(r.err) {
			// Nothing in flight there will be answered either.
			h.socks.Kill()
			if before.State <= hosthealth.Unknown {
				// The pools let go of the connections just cut, so that
				// none is counted again when it is next acquired.
				p.telemetry.closed(h, closedSilentHost, h.openConns())
				h.pool.Reset()
				h.reads.Reset()
			}
		}
		if hosthealth.Classify(r.err) != hosthealth.NotFailover {
			p.steer.failed(h.addr, r.err)
		}
	} else {
		h.socks.Up()
		p.roleSeen(h, r.role, r.since)
		p.tracker.ObserveZone(h.addr, r.zone)
	}
	p.probedLag(h.addr, r) // rebuilds the routes with the tracker's news too
	after, _ := p.status(h.addr)
	if r.err != nil && after.State != before.State {
		p.warnHost(h.addr, "pgfailover: probe failed", slog.String("error", r.err.Error()))
	}
	if after.State != before.State && after.State > hosthealth.Unknown {
		p.refreshTopology() // a host went down: the cluster may have moved
	}
}

// status returns what the tracker knows about the host at addr.
func (p *Pool) status(addr string) (hosthealth.HostStatus, bool) {
	s := p.tracker.Snapshot()
	if i, ok := s.Lookup(addr); ok {
		return s.Host(i), true
	}
	return hosthealth.HostStatus{}, false
}

// startProbe starts h's probe loop, on the schedule probe.Schedule
// describes: every health_probe_interval while no call waits, faster while
// calls wait for a usable host, with a backoff of its own while the host
// cannot be reached, and at once when the topology source names it the
// new primary (see hintPrimary). The loop ends, and closes its
// connection, when the Pool closes or h leaves the topology. Called with
// topoMu held.
func (p *Pool) startProbe(h *hostPool) {
	ctx, stop := context.WithCancel(p.life)
	h.stopProbe = stop
	hint := make(chan struct{}, 1)
	if p.hints == nil {
		p.hints = make(map[string]chan struct{})
	}
	p.hints[h.addr] = hint
	sched := probe.Schedule{Idle: p.cfg.HealthProbeInterval, WaitMax: p.cfg.HealthProbeWaitMax, Rand: rand.Int64N}
	p.bg.Go(func() {
		defer close(h.probeDone)
		defer h.probe.close()
		st := probe.State{Last: p.clock.Now()}
		for {
			// The wake channel is read before the waiters are counted: a
			// first waiter that arrives in between closes this very
			// channel, so the probe cannot sleep through it.
			wake := *p.wake.Load()
			now := p.clock.Now()
			w := p.waitState()
			claimed := p.claimedPrimary(h.addr)
			at := sched.Next(st, w, claimed, now)
			if plan := sched.Watch(st, w, claimed, p.watchable(h), now); plan.Checks > 0 {
				at = sched.AfterWatch(st, plan) // the watch itself waited
			}
			why := p.sleepUntil(ctx, at, wake, hint)
			if why == wakeWaiter {
				// The first waiter wakes every probe at once, but a
				// host inside its own backoff waits for its end.
				why = p.sleepUntil(ctx, sched.Woken(st, p.clock.Now()), nil, hint)
			}
			switch why {
			case wakeStopped:
				return
			case wakeHint:
				st = sched.Hinted(st, p.clock.Now())
				continue
			}
			h.probes.Add(1)
			st.Began = p.clock.Now()
			w = p.waitState()
			plan := sched.Watch(st, w, p.claimedPrimary(h.addr), p.watchable(h), st.Began)
			if w.Waiting {
				p.readyForPromotion()
			}
			r := p.probeOnce(ctx, h, plan)
			st = sched.Observe(st, probe.OutcomeOf(r.err), p.clock.Now())
			p.probed(h, r)
			p.dropUnusedStandby(h)
		}
	})
}

// promotable reports whether host h is a replica, last seen read-only,
// whose promotion would make it usable for the Pool's target (primary,
// read-write).
func (p *Pool) promotable(h *hostPool) bool {
	if !p.awaitsPromotion() {
		return false
	}
	s, ok := p.status(h.addr)
	return ok && s.Role == hosthealth.RoleReplica
}

// awaitsPromotion reports whether the Pool's target takes a primary and
// not a replica (primary, read-write): the targets for which a replica
// becomes usable by being promoted.
func (p *Pool) awaitsPromotion() bool {
	t := p.cfg.Target
	return t.Accepts(hosthealth.RolePrimary) && !t.Accepts(hosthealth.RoleReplica)
}

// watchable reports whether host h is promotable and its probe connection
// can watch for the promotion.
func (p *Pool) watchable(h *hostPool) bool {
	return !h.probe.unwatched.Load() && p.promotable(h)
}

// wakeup is why a probe loop's sleep ended.
type wakeup int

const (
	wakeTimeUp  wakeup = iota // the time it slept until came
	wakeWaiter                // the first call to wait closed the wake channel
	wakeHint                  // the topology source named the host the new primary
	wakeStopped               // the loop's context ended
)

// sleepUntil waits on the Pool's clock until at, until wake closes or a
// hint arrives, or until ctx ends, and says which came first. When at has
// passed it does not wait, but a hint already pending still counts: a
// replica watched without a pause between its watches (each watch waits
// itself) must still hear that it was named the primary.
func (p *Pool) sleepUntil(ctx context.Context, at time.Time, wake, hint <-chan struct{}) wakeup {
	d := at.Sub(p.clock.Now())
	if d <= 0 {
		if ctx.Err() != nil {
			return wakeStopped
		}
		select {
		case <-hint:
			return wakeHint
		default:
			return wakeTimeUp
		}
	}
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return wakeStopped
	case <-t.C():
		return wakeTimeUp
	case <-wake:
		return wakeWaiter
	case <-hint:
		return wakeHint
	}
}

// hintPrimary tells the probe loop of the host at addr that the topology
// source now names it the primary, so that it probes the host at once (see
// probe.Schedule.Hinted). A hint already pending is enough. Called with
// topoMu held.
func (p *Pool) hintPrimary(addr string) {
	select {
	case p.hints[addr] <- struct{}{}:
	default:
	}
}

// waitState reports whether calls wait for a usable host, and since when.
func (p *Pool) waitState() probe.Wait {
	if p.waiting.Load() == 0 {
		return probe.Wait{}
	}
	return probe.Wait{Waiting: true, Since: time.Unix(0, p.waitSince.Load())}
}

// claimedPrimary reports whether a topology source claims the host at
// addr is the primary.
func (p *Pool) claimedPrimary(addr string) bool {
	s, ok := p.status(addr)
	return ok && s.Claimed == hosthealth.RolePrimary
}

// waitStarted tells the probes that a call is waiting for a usable host.
// The first waiter wakes every probe at once. A wait that begins at
// least sameOutage after the last one ended starts the list of waiting
// statements afresh; one that begins sooner (a call woken by a change
// of the routing state that waits again) belongs to the same outage.
func (p *Pool) waitStarted() {
	if p.waiting.Add(1) == 1 {
		now := p.clock.Now().UnixNano()
		p.waitSince.Store(now)
		if now-p.waitEndedAt.Load() >= int64(sameOutage) {
			p.waitingSQL.reset()
		}
		next := make(chan struct{})
		close(*p.wake.Swap(&next))
		p.refreshTopology()
	}
}

// sameOutage is how soon after the last wait ended a new one belongs to
// the same outage (waitStarted).
const sameOutage = time.Second

// waitEnded undoes waitStarted.
func (p *Pool) waitEnded() {
	if p.waiting.Add(-1) == 0 {
		p.waitEndedAt.Store(p.clock.Now().UnixNano())
	}
}
