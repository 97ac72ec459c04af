package failover

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover/internal/follow"
	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/replica"
)

// Reader sends reads to the replicas. It has no Exec, and every session it
// opens logs in with default_transaction_read_only on, so a statement that
// writes fails (25006), on the primary too. A statement sent through the
// Reader that turns that default off (SET default_transaction_read_only =
// off, SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE) holds for
// the rest of its own call only: the session is closed before another
// read takes it (on PostgreSQL 14 and later, which report the change).
//
// Each read goes round-robin to a replica that is usable and fresh
// enough, those in the client's zone first.
//
// A read sees every write through the same Pool that completed before it
// began (read-your-writes): for pin_after_write after a call that may
// have written (a committed transaction that wrote included, and a write
// whose outcome is unknown: it may have committed), a read goes
// to a replica only when the replica has replayed a position of the
// primary sampled after that write. The newest sample serves when it is
// that recent (the probes take one each health_probe_interval); else the
// read asks the primary for its position, and every read that needs one
// meanwhile shares that one request. Whether a replica has replayed the
// position comes from its last probe, or, when that is older, from the
// replica itself: one more round trip on the replica, on the connection
// the read then uses. A replica that has not replayed it yet is given up
// to replica_wait to do so, asked again from 200µs apart, the gap doubling
// up to 2ms.
// The primary takes the read instead when:
//
//   - a write through the Pool completed less than pin_after_write ago
//     and no replica has replayed it within replica_wait, or no sample of
//     the current primary taken after the write could be had (after a
//     change of primary, reads pinned by a write go to the primary until
//     the new one is sampled), unless no primary is usable (below);
//   - every replica is down, in the wrong role, or stale past max_lag;
//   - there is no replica at all (New does not need one).
//
// While no host is usable as the primary (the primary's failure was seen
// and no host has been found writable since), a read that must see
// writes (pinned by one, or with a CausalToken) that no replica is known
// to have replayed does not wait for a primary; with outage_reads=replica
// (the default) it follows the outage rule. Its position is the end of
// the most WAL any replica holds (pg_last_wal_receive_lsn, or the replay
// position when further), over every replica whose last probe was
// answered, each looked at after the writes the read must see: after the
// last write through the Pool for a pinned read; for one with a token,
// after the rule was first applied to it (its writes were acknowledged
// before it began). The probes look, and a read finding a replica
// not looked at since looks itself, once per replica: one round trip on
// the connection it then uses, which every later read can count on. A
// replica that has replayed that position takes the read, given up to
// replica_wait to get there, as for a read's own position. The position
// counts:
//
//   - with synchronous replication (the primary last probed had
//     synchronous_standby_names set, and synchronous_commit on or
//     remote_apply in the probe's session), at once: a commit is
//     acknowledged only once a standby has flushed it, so the read sees
//     every write acknowledged before it, provided every standby that can
//     acknowledge one is among the replicas counted;
//   - otherwise (and when the primary was never probed) only once no
//     replica counted has a WAL receiver connected to a sender
//     (pg_stat_wal_receiver): none can receive more, so the read sees
//     every write that any promotion of them can keep, and misses an
//     acknowledged write that reached none of them, which that promotion
//     loses too. A replica a read looks at whose receiver is still
//     connected is asked again within the same replica_wait: it takes a
//     receiver a moment to see its sender go.
//
// When the position cannot be had yet, or no replica has replayed it
// (the WAL a replica received ends inside a record, which it cannot
// replay until more comes; its replay is paused), the read waits as
// before, until a primary is usable or a probe or another read's check
// shows a replica that qualifies, and fails with the same typed errors.
// With outage_reads=wait every such read waits. Once a host is usable as
// the primary the rule no longer applies: a read picks again by the rules
// above, and positions of the old primary's timeline are never compared
// with the new one's. The reads sent by the rule count in
// pgfailover.reads with the reason outage_sync or outage_async.
//
// When a replica fails under a read, a read that is safe to replay moves
// to the next replica, then to the primary, under the same rules and
// typed errors as the Pool's calls. With max_lag set and every replica
// stale, reads go to the primary; if the primary is down as well they
// wait for one like any call, and fail with a *FailoverError whose Hosts
// say why each host was passed over (a *ReplicaLagError for a stale
// replica). With max_lag unset, replicas keep serving reads while the
// primary is down, those that must see writes under the outage rule.
//
// The Reader does not depend on the Pool's target: the Pool's calls go
// where target says, without the staleness gate, and the Reader always
// reads from the freshest-enough replicas. Both see the same hosts.
//
// A Reader is safe for concurrent use. Get it from Pool.Reader.
type Reader struct {
	p      *Pool
	router replica.Router
	wait   time.Duration               // replica_wait
	follow atomic.Pointer[follow.Pool] // PgxPool's pool, nil until first asked for; built under Pool.followMu
}

// Reader returns the Pool's Reader. Until it is first called, the Pool
// does not time its writes for pin_after_write; the first call counts as
// a write completed then if any call went through the Pool before, so
// the reads of the first pin_after_write after it are pinned as after a
// write. Get the Reader once, when the Pool is made, to avoid that.
func (p *Pool) Reader() *Reader {
	if !p.readerTaken.Load() {
		p.takeReader()
	}
	return p.reader
}

// takeReader starts timing the Pool's writes for the Reader's pin. Until
// the Reader is first asked for, no write is timed (recordsWrites); if a
// call has succeeded before, it may have written just now, so the Reader
// starts as if one had.
func (p *Pool) takeReader() {
	p.readerTaken.Store(true)
	if p.calledOnce.Load() {
		p.noteWrite()
	}
}

// next is the Reader's picker: the replica whose turn it is, else the
// primary. It records where the read went on the call.
// Its candidates are the routes' replicas (hoststate.Routes.Replicas).
func (r *Reader) next(rs *routes, c *call) (*hostpool.Host, bool) {
	// The pin after a write was turned into a position by pin, before the
	// call began: nothing here asks for one.
	read := replica.Read{After: c.after}
	if r.router.Policy.MaxLag > 0 {
		read.Now = r.p.clock.Now() // for the staleness gate, the only reader of it here
	}
	cands := rs.Cands
	if c.passedOver() {
		// Replicas this read failed on, or found behind its position, are
		// passed over for good.
		cands = append([]replica.Candidate(nil), cands...)
		for i, h := range rs.Replicas {
			if c.failedOn(h.Addr) || slices.Contains(c.ev.behind, h.Addr) {
				cands[i].Usable = false
			}
		}
	}
	i, reason := replica.Primary, replica.Pinned
	if c.after != unknownPosition {
		i, reason = r.router.Route(read, cands)
	}
	verify := reason == replica.Verify
	if i == replica.Primary && c.after != 0 && rs.Outage != nil && r.router.Policy.OutageReads == replica.OutageReplica {
		i, reason, verify = r.routeInOutage(rs, c, read.Now)
	}
	switch {
	case i != replica.Primary && reason == replica.Eligible && c.after != 0:
		reason = replica.CaughtUp // its probe says it has replayed the position
	case i == replica.Primary && c.is(pinned):
		reason = replica.Pinned
	case i == replica.Primary && c.ev != nil && len(c.ev.behind) > 0:
		reason = replica.Lagging // the replicas asked had not replayed it
	}
	c.set(verifyPos, verify)
	c.reason = reason
	if i != replica.Primary {
		return rs.Replicas[i], false
	}
	return picker{target: hosthealth.TargetPrimary}.next(rs, c)
}

// lastWriteTime returns when a call that may have written last completed,
// or the zero time.
func (p *Pool) lastWriteTime() time.Time {
	n := p.lastWrite.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// pin turns the pin of a read made less than pin_after_write after a
// write through the Pool into a position the read must see: that of a
// sample of the primary taken after the write. The newest sample serves
// when it is that recent; else the read asks the primary, or waits for
// the request in flight (Sampler). Without a primary to ask, or when
// asking fails, the read goes to the primary. A read with a causal token
// is not pinned: its token says what it must see.
func (r *Reader) pin(c *call) {
	if c.after != 0 {
		return
	}
	wrote := r.p.lastWriteTime()
	if wrote.IsZero() || !r.router.Pinned(replica.Read{Now: r.p.clock.Now(), LastWrite: wrote}) {
		return
	}
	c.set(pinned, true)
	c.after = unknownPosition
	// A read waits for at most one request of another read's; after that
	// it asks, once.
	for range 3 {
		rs := r.p.state.Routes()
		ranked := rs.Ranked[hosthealth.TargetPrimary]
		if len(ranked) == 0 || !slices.ContainsFunc(rs.Cands, func(c replica.Candidate) bool { return c.Usable }) {
			// No primary known now (the read waits for one there), or no
			// replica to read on: nothing to ask.
			return
		}
		h := ranked[0]
		s, step, done := r.p.state.NeedSample(h.Addr, wrote)
		switch step {
		case replica.Use:
			c.after = s.LSN
			return
		case replica.Ask:
			since := r.p.hosts.EpochOf(h)
			s, ok := r.p.samplePrimary(c.ctx, h)
			r.p.state.AnswerSample(h.Addr, since, s, ok)
			if ok && s.At.After(wrote) {
				c.after = s.LSN
			}
			return
		case replica.Wait:
			select {
			case <-done:
			case <-c.ctx.Done():
				return
			}
		}
	}
}

// positionSQL asks the primary for its WAL position, in the form the
// probe reads it.
const positionSQL = "SELECT pg_current_wal_insert_lsn()::text, current_setting('wal_block_size')::int"

// samplePrimary asks the primary h for its WAL position now, normalised as
// the probe's is (recordEnd). ok is false when it did not answer within
// health_probe_timeout.
func (p *Pool) samplePrimary(ctx context.Context, h *hostpool.Host) (replica.Sample, bool) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.HealthProbeTimeout)
	defer cancel()
	asked := p.clock.Now()
	var text string
	var blockSize uint64
	if err := h.Calls.QueryRow(ctx, positionSQL).Scan(&text, &blockSize); err != nil {
		return replica.Sample{}, false
	}
	pos, err := replica.ParseLSN(text)
	if err != nil || pos == 0 {
		return replica.Sample{}, false
	}
	return replica.Sample{LSN: probe.RecordEnd(pos, blockSize), At: asked}, true
}

// startReadCall sets up c, a zero call, as a call of the Reader (see
// Pool.startCall): its causal token, if any, applies, and no pin after a
// write (the Reader's PgxPool places long-lived connections with it;
// startPinnedCall is for one read).
func (r *Reader) startReadCall(c *call, ctx context.Context) {
	c.p, c.ctx, c.picker = r.p, ctx, picker{target: hosthealth.TargetAny, reads: r}
	if tok := causalTokenFrom(ctx); tok != nil {
		c.after = replica.LSN(tok.pos.Load())
	}
}

// startPinnedCall sets up c as a call of the Reader for one read: the pin
// after a write applies to it.
func (r *Reader) startPinnedCall(c *call, ctx context.Context) {
	r.startReadCall(c, ctx)
	r.pin(c)
}

// Query runs a read and returns its rows, as Pool.Query does, on a replica
// or (see Reader) the primary, in a read-only session.
func (r *Reader) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	var c call
	r.startPinnedCall(&c, ctx)
	return startRows(&c, sql, args)
}

// QueryRow runs a read expected to return at most one row, as
// Pool.QueryRow does, on a replica or the primary.
func (r *Reader) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	var c call
	r.startPinnedCall(&c, ctx)
	return sendRow(&c, sql, args)
}

// SendBatch sends a batch of reads, as Pool.SendBatch does, on a replica
// or the primary. A statement in it that writes fails.
func (r *Reader) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	br := &batchResults{ctx: ctx, batch: b, queued: snapshot(b)}
	r.startPinnedCall(&br.call, ctx)
	if err := br.send(); err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return br
}

// ErrReadWriteTx is returned by Reader.BeginTx when asked for a
// read-write transaction.
var ErrReadWriteTx = errors.New("pgfailover: the Reader begins read-only transactions only")

// BeginTx begins a read-only transaction on a replica or the primary. The
// zero AccessMode means read-only here; pgx.ReadWrite is refused with
// ErrReadWriteTx. Like Pool.BeginTx, the transaction stays on its host.
func (r *Reader) BeginTx(ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error) {
	if txOptions.AccessMode == pgx.ReadWrite {
		return nil, ErrReadWriteTx
	}
	txOptions.AccessMode = pgx.ReadOnly
	var c call
	r.startPinnedCall(&c, ctx)
	return r.p.beginTx(&c, ctx, txOptions)
}

// ReplicaLagError says why a replica was passed over: its staleness bound
// was unknown, or above max_lag.
type ReplicaLagError struct {
	Addr   string
	Known  bool          // false: never probed, its probe failed, or nothing replayed yet
	Bound  time.Duration // the staleness bound when Known
	MaxLag time.Duration
}

func (e *ReplicaLagError) Error() string {
	if !e.Known {
		return "replica " + e.Addr + ": staleness unknown, max_lag " + e.MaxLag.String()
	}
	return "replica " + e.Addr + ": stale by up to " + e.Bound.Round(time.Millisecond).String() + ", max_lag " + e.MaxLag.String()
}

// lagError returns why the Reader would pass over the replica at addr for
// staleness now, or nil.
func (r *Reader) lagError(addr string) error {
	if r.router.Policy.MaxLag == 0 {
		return nil
	}
	c, ok := r.p.state.Routes().Fresh[addr]
	now := r.p.clock.Now()
	if ok && r.router.Eligible(&replica.Candidate{Usable: true, Fresh: c.Fresh}, now) {
		return nil
	}
	bound, known := c.Staleness(now)
	return &ReplicaLagError{Addr: addr, Known: ok && known, Bound: bound, MaxLag: r.router.Policy.MaxLag}
}

// unknownPosition is the position of a causal token whose write's
// position could not be read: reads carrying it go to the primary.
const unknownPosition = replica.LSN(math.MaxUint64)

// PgxPool returns a genuine *pgxpool.Pool for reads, for libraries that
// need the concrete type (see failover/stdlib.OpenReaderDB). Its sessions
// are read-only. Each new connection goes where the Reader would send a
// read (a fresh-enough replica in turn, same zone first, else the
// primary), and stays there while it lives: an idle connection is handed
// out only while its host would still take a read (a replica within
// max_lag, or the primary while no replica is), so connections drift back
// to the replicas as they recover. Reads are routed per connection, not
// per statement: read-your-writes (pin_after_write, replica_wait) and
// causal tokens do not apply, and nothing is replayed.
// It is built on first use; Pool.Close closes it.
func (r *Reader) PgxPool() *pgxpool.Pool {
	if f := r.follow.Load(); f != nil {
		return f.PgxPool
	}
	p := r.p
	p.followMu.Lock()
	defer p.followMu.Unlock()
	if f := r.follow.Load(); f != nil {
		return f.PgxPool
	}
	f := p.newFollower(r.startReadCall, hosthealth.TargetAny, true, r.connUsable)
	r.follow.Store(f)
	if p.closed.Load() {
		f.PgxPool.Close() // Close may have looked for it before it existed
	}
	return f.PgxPool
}

// connUsable reports whether an idle connection of PgxPool's may be
// handed out: nothing waits on its socket, and its host would still take
// a read.
func (r *Reader) connUsable(conn *pgx.Conn) bool {
	st := hostpool.StateOf(conn.PgConn())
	h := st.Host
	if h == nil || !r.p.hosts.StillOpen(h, st) {
		return false
	}
	rs := r.p.state.Routes()
	if !rs.Holds(h.Addr, h) {
		return false // its host left the topology
	}
	now := r.p.clock.Now()
	eligible := false
	for i, rh := range rs.Replicas {
		if r.router.Eligible(&rs.Cands[i], now) {
			if rh == h {
				return true
			}
			eligible = true
		}
	}
	// Not an eligible replica: the primary, while no replica is.
	return !eligible && rs.Usable(h.Addr, hosthealth.TargetPrimary)
}
