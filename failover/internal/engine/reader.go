package engine

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/replica"
)

// Reader routes the reads of a Pool's Reader (failover.Reader documents
// the rules): each to a replica that is usable and fresh enough, or the
// primary, with the pin after a write, causal tokens and the outage rule.
type Reader struct {
	e      *Engine
	router replica.Router
	wait   time.Duration // replica_wait
}

// Reader returns the engine's Reader.
func (e *Engine) Reader() *Reader { return &e.reader }

// TakeReader records that the Pool's Reader has been asked for: from then
// on the Pool's writes are timed for pin_after_write (see takeReader).
func (e *Engine) TakeReader() {
	if !e.readerTaken.Load() {
		e.takeReader()
	}
}

// takeReader starts timing the Pool's writes for the Reader's pin. Until
// the Reader is first asked for, no write is timed (recordsWrites); if a
// call has succeeded before, it may have written just now, so the Reader
// starts as if one had.
func (e *Engine) takeReader() {
	e.readerTaken.Store(true)
	if e.calledOnce.Load() {
		e.noteWrite()
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
		read.Now = r.e.Clock.Now() // for the staleness gate, the only reader of it here
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
	if c.after != UnknownPosition {
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

// LastWrite returns when a call that may have written last completed,
// or the zero time.
func (e *Engine) LastWrite() time.Time {
	n := e.lastWrite.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// pin turns the pin of a read made less than pin_after_write after a
// write through the Pool into a position the read must see: that of a
// sample of the primary taken after the write. The newest sample serves
// when it is that recent; else the read asks the primary, or waits for
// the request in flight (replica.Sampler). Without a primary to ask, or when
// asking fails, the read goes to the primary. A read with a causal token
// is not pinned: its token says what it must see.
func (r *Reader) pin(c *call) {
	if c.after != 0 {
		return
	}
	wrote := r.e.LastWrite()
	if wrote.IsZero() || !r.router.Pinned(replica.Read{Now: r.e.Clock.Now(), LastWrite: wrote}) {
		return
	}
	c.set(pinned, true)
	c.after = UnknownPosition
	// A read waits for at most one request of another read's; after that
	// it asks, once.
	for range 3 {
		rs := r.e.State.Routes()
		ranked := rs.Ranked[hosthealth.TargetPrimary]
		if len(ranked) == 0 || !slices.ContainsFunc(rs.Cands, func(c replica.Candidate) bool { return c.Usable }) {
			// No primary known now (the read waits for one there), or no
			// replica to read on: nothing to ask.
			return
		}
		h := ranked[0]
		s, step, done := r.e.State.NeedSample(h.Addr, wrote)
		switch step {
		case replica.Use:
			c.after = s.LSN
			return
		case replica.Ask:
			since := r.e.Hosts.EpochOf(h)
			s, ok := r.e.samplePrimary(c.ctx, h)
			r.e.State.AnswerSample(h.Addr, since, s, ok)
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
// the probe's is (probe.RecordEnd). ok is false when it did not answer within
// health_probe_timeout.
func (e *Engine) samplePrimary(ctx context.Context, h *hostpool.Host) (replica.Sample, bool) {
	ctx, cancel := context.WithTimeout(ctx, e.HealthProbeTimeout)
	defer cancel()
	asked := e.Clock.Now()
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
// Engine.startCall): its causal token, if any, applies, and no pin after a
// write (the Reader's PgxPool places long-lived connections with it;
// startPinnedCall is for one read).
func (r *Reader) startReadCall(c *call, ctx context.Context) {
	c.e, c.ctx, c.picker = r.e, ctx, picker{target: hosthealth.TargetAny, reads: r}
	if tok := tokenFrom(ctx); tok != nil {
		c.after = tok.Position()
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

// BeginTx begins a read-only transaction on a replica or the primary,
// whatever txOptions.AccessMode says. Like Pool.BeginTx, the transaction
// stays on its host.
func (r *Reader) BeginTx(ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error) {
	txOptions.AccessMode = pgx.ReadOnly
	var c call
	r.startPinnedCall(&c, ctx)
	return r.e.beginTx(&c, ctx, txOptions)
}

// lagError returns why the Reader would pass over the replica at addr for
// staleness now, or nil.
func (r *Reader) lagError(addr string) error {
	if r.router.Policy.MaxLag == 0 {
		return nil
	}
	c, ok := r.e.State.Routes().Fresh[addr]
	now := r.e.Clock.Now()
	if ok && r.router.Eligible(&replica.Candidate{Usable: true, Fresh: c.Fresh}, now) {
		return nil
	}
	bound, known := c.Staleness(now)
	return &ReplicaLagError{Addr: addr, Known: ok && known, Bound: bound, MaxLag: r.router.Policy.MaxLag}
}

// ConnUsable reports whether an idle connection of the Reader's PgxPool
// may be handed out: nothing waits on its socket, and its host would still take
// a read.
func (r *Reader) ConnUsable(conn *pgx.Conn) bool {
	st := hostpool.StateOf(conn.PgConn())
	h := st.Host
	if h == nil || !r.e.Hosts.StillOpen(h, st) {
		return false
	}
	rs := r.e.State.Routes()
	if !rs.Holds(h.Addr, h) {
		return false // its host left the topology
	}
	now := r.e.Clock.Now()
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
