package engine

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/replica"
)

// The Reader's outage rule (see Reader): which replica may take a read
// that must see writes while no host is usable as the primary, and how a
// read looks at a replica's WAL for it.

// routeInOutage routes read c, which must see writes that no replica is
// known to have replayed, while no host is usable as the primary
// (rs.Outage is set): the outage rule (see Reader). It returns the
// replica's index in rs and the reason, with verify set when the replica
// is to be checked on the connection the read then uses (confirm); or
// replica.Primary, and the read waits, as any read does, for the routing
// state to change. now is the read's time for the staleness gate, zero
// without one.
func (r *Reader) routeInOutage(rs *routes, c *call, now time.Time) (int, replica.Reason, bool) {
	ev := c.events()
	since := r.outageSince(c)
	pos, known := rs.Outage.Position(since)
	// Only the replicas this read failed on are passed over, and those it
	// found short of the outage's position until they are known to have
	// replayed it: one behind the read's own position may hold what the
	// rule asks, and one still replaying will get there.
	cands := slices.Clone(rs.Cands)
	for i, h := range rs.Replicas {
		if c.failedOn(h.Addr) || slices.Contains(ev.short, h.Addr) && !(known && cands[i].Replayed >= pos) {
			cands[i].Usable = false
		}
	}
	reason := replica.OutageAsync
	if rs.Outage.Sync() {
		reason = replica.OutageSync
	}
	if known {
		// A replica known to have replayed it takes the read; else one is
		// checked, as for a read's own position.
		ev.outage = pos
		if i, how := r.router.Route(replica.Read{Now: now, After: pos}, cands); i != replica.Primary {
			return i, reason, how == replica.Verify
		}
		return replica.Primary, replica.Lagging, false
	}
	// Not known yet: a replica not looked at since the writes is looked
	// at, once for the read.
	ev.outage = 0
	for i, h := range rs.Replicas {
		if r.router.Eligible(&cands[i], now) && rs.Outage.Stale(h.Addr, since) && !slices.Contains(ev.looked, h.Addr) {
			return i, reason, true
		}
	}
	return replica.Primary, replica.Lagging, false
}

// outageSince returns the time after which the replicas must have been
// looked at for read c while no primary is usable: for a read pinned by a
// write, when the last write through the Pool completed (every write it
// must see was acknowledged by then); for one with a causal token, when
// the outage rule was first applied to it (the token's writes were
// acknowledged before the read began).
func (r *Reader) outageSince(c *call) time.Time {
	if c.is(pinned) {
		return r.e.LastWrite()
	}
	ev := c.events()
	if ev.since.IsZero() {
		ev.since = r.e.Clock.Now()
	}
	return ev.since
}

// confirm checks on conn, for read c, what next left to the replica h at
// its other end (c.is(verifyPos)): that it has replayed the read's position,
// waiting up to replica_wait; while no primary is usable, that it has
// replayed the outage's position, or, when that position could not be
// had, what it holds (look). It returns whether the read takes h; if not,
// the read picks again, and passes h over as next and routeInOutage say.
func (r *Reader) confirm(c *call, h *hostpool.Host, conn *pgxpool.Conn) bool {
	if !c.reason.InOutage() {
		_, ok, waited := r.replayed(c, h, conn, c.after)
		switch {
		case !ok:
			ev := c.events() // not before: a read that finds its position allocates nothing
			ev.behind = append(ev.behind, h.Addr)
		case waited:
			c.reason = replica.Waited
		default:
			c.reason = replica.CaughtUp
		}
		return ok
	}
	if pos := c.ev.outage; pos != 0 { // routeInOutage made c.ev
		_, ok, _ := r.replayed(c, h, conn, pos)
		if !ok {
			c.ev.short = append(c.ev.short, h.Addr)
		}
		return ok
	}
	return r.look(c, h, conn)
}

// lookSQL asks a server how far it has replayed WAL (or, out of recovery,
// its insert position), how far it has received it, and whether it
// receives WAL now: what the probe asks of a replica for the outage rule
// (package probe's probeSQL).
const lookSQL = "SELECT (" + probe.WALSQL + ")::text, (" + probe.ReceivedSQL + ")::text, " + probe.ReceivingSQL

// look asks the replica h at the other end of conn what it holds, for
// read c while no primary is usable and the outage's position cannot be
// had, and records it: one round trip. The read takes h when, with what h
// said, the position can be had and h has replayed it; else it picks
// again, and does not look at h again. Without synchronous replication, a
// replica whose WAL receiver has not yet seen its sender go is asked
// again, as for a read's position, while the read has waited less than
// replica_wait for replicas in all.
func (r *Reader) look(c *call, h *hostpool.Host, conn *pgxpool.Conn) bool {
	ev := c.events()
	ev.looked = append(ev.looked, h.Addr)
	for n := 1; ; n++ {
		rep, ok := r.askHeld(c.ctx, conn)
		if !ok {
			return false
		}
		r.e.Hosts.Observe(h, hoststate.Observation{Kind: hoststate.Looked, Report: rep, Server: hostpool.StateOf(conn.Conn().PgConn()).Server})
		rs := r.e.State.Routes()
		if rs.Outage == nil {
			return false // a primary is usable again
		}
		if pos, ok := rs.Outage.Position(r.outageSince(c)); ok {
			return rep.Replayed >= pos
		}
		if !rep.Receiving || rs.Outage.Sync() || !r.pause(c, replayPolls.Base(n)) {
			return false
		}
	}
}

// askHeld asks the server at the other end of conn what WAL it holds
// (lookSQL), as of the time returned in the Report.
func (r *Reader) askHeld(ctx context.Context, conn *pgxpool.Conn) (replica.Report, bool) {
	rep := replica.Report{At: r.e.Clock.Now()}
	var replayed, received *string
	if err := conn.QueryRow(ctx, lookSQL).Scan(&replayed, &received, &rep.Receiving); err != nil || replayed == nil {
		return rep, false
	}
	var err error
	if rep.Replayed, err = replica.ParseLSN(*replayed); err != nil {
		return rep, false
	}
	if received != nil {
		if rep.Received, err = replica.ParseLSN(*received); err != nil {
			return rep, false
		}
	}
	return rep, true
}
