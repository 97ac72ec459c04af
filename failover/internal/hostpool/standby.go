package hostpool

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// While calls wait for a primary, the replica most likely to be promoted
// gets connections in its calls pool opened ahead of the promotion, one
// for each call waiting to run there (not the Reader's, nor PgxPool's
// connects, which use pools of their own) up to failover_ready_conns
// (pool_max_conns by default). A session on a standby stays open when its
// server is promoted and takes writes from then on, so the waiting calls
// find connections there once the probe sees the promotion instead of
// waiting for logins (tens of milliseconds, more on a loaded machine, and
// all of them at the moment the new primary starts). Those are the
// connections the Pool would open on the new primary a moment later
// anyway; when another host takes over instead, or the old primary comes
// back, they were opened for nothing and are closed when the wait ends.
//
// Each connection opened so also prepares, while its server is still a
// standby, the statements of the waiting calls (waitingStatements), so
// that the server has parsed them and loaded what they need of its
// catalog before the promotion: the first statement on a fresh session
// otherwise pays for that after it (measured here: 9 ms at the median for
// a one-row insert, against 1–2 ms for the next one). The statements are
// prepared unnamed, so nothing stays on the session that the next
// statement does not replace, and a statement the standby refuses to
// parse is left for the call to meet.
//
// Such a connection is marked standby in its ConnState. The acquire check
// hands it out only while it is being opened (to the acquires that open
// them) and once the routing state takes the host for the Pool's target,
// that is, once a probe has seen the promotion; until its next statement
// the session still reports in_hot_standby=on. Its login does not record
// the role it reports either: a primary fenced read-only by its
// configuration, which the probe counts as a replica, reports
// in_hot_standby=off, and taking that for a promotion would send it a
// write it refuses once per opening. A statement the server still refuses
// as read-only is a refusal before it ran, retried as any other. When the
// last waiting call ends without a promotion, it has the pool check its
// idle connections, which closes them (DropUnusedStandbys); so does each probe
// while no call waits.

// standbyKey marks the context of the acquires that open connections to a
// standby ahead of its promotion.
type standbyKey struct{}

// openingStandby reports whether ctx is one of those acquires'.
func openingStandby(ctx context.Context) bool {
	v, _ := ctx.Value(standbyKey{}).(bool)
	return v
}

// standbyUsable reports whether an idle connection opened on host h while
// it was a standby may be handed out: while such connections are being
// opened (by the acquires that open them: a call acquires from h only
// once h takes its calls), and once h takes the Pool's calls.
func (s *Set) standbyUsable(h *Host) bool {
	return h.opening.Load() || s.canTake(h, s.cfg.Target)
}

// keepStandbyReady opens, in the background, connections to host h, the
// likeliest replica to be promoted (readyForPromotion), for its
// promotion: one for each call waiting to run on a host's calls pool, up
// to failover_ready_conns and pool_max_conns, when fewer are ready; each
// prepares the waiting calls' statements. It also has those already open
// prepare the statements that calls began to wait with since. It stops
// once h is no longer a replica. The acquires hold every connection until
// all are open, so that each opens one of its own.
func (s *Set) keepStandbyReady(h *Host) {
	if !s.standbyShort(h) || !h.opening.CompareAndSwap(false, true) {
		return
	}
	started := s.cfg.GoUnlessClosed(func() {
		ctx, cancel := context.WithTimeout(context.WithValue(s.cfg.Life, standbyKey{}, true), s.cfg.ProbeConnectTimeout)
		defer cancel()
		var held []*pgxpool.Conn
		var err error
		// An acquire hands out the connections already open first.
		for err == nil && len(held) < s.readyWanted(h) && s.promotable(h) {
			var conn *pgxpool.Conn
			if conn, err = h.Calls.Acquire(ctx); err == nil {
				held = append(held, conn)
			}
		}
		h.readied.Store(int32(len(held)))
		version, stmts := s.waits.sql.list()
		for _, conn := range held {
			s.prepareWaiting(ctx, h, conn.Conn().PgConn(), version, stmts)
			conn.Release()
		}
		// Recorded even where preparing stopped early: a connection that
		// failed is gone, and once h no longer awaits a promotion nothing
		// more is prepared there.
		h.prepared.Store(version)
		h.opening.Store(false)
		// A call that started to wait after the last count found the
		// opening under way and left it to this one. After a failed
		// acquire, the next probe tries again.
		if err == nil {
			s.readyForPromotion()
		}
		s.dropUnusedStandby(h) // when the last call stopped waiting meanwhile
	})
	if !started {
		h.opening.Store(false)
	}
}

// standbyShort reports whether host h has fewer connections ready for
// its promotion than readyWanted, or has not prepared every waiting
// call's statement on them.
func (s *Set) standbyShort(h *Host) bool {
	v := s.waits.sql.version.Load()
	return s.readyWanted(h) > int(h.readied.Load()) || (statementCount(v) > 0 && h.prepared.Load() != v)
}

// prepareWaiting prepares on conn, opened on host h ahead of its
// promotion, the statements of the list at version that it has not
// prepared yet. It stops when h no longer awaits a promotion (the calls
// need the connection then) or the connection fails.
func (s *Set) prepareWaiting(ctx context.Context, h *Host, conn *pgconn.PgConn, version uint64, stmts []string) {
	st := StateOf(conn)
	from := 0
	if sameList(st.prepared, version) {
		from = statementCount(st.prepared)
	}
	for i := from; i < len(stmts) && s.promotable(h); i++ {
		if _, err := conn.Prepare(ctx, "", stmts[i], nil); err != nil {
			if _, ok := errors.AsType[*pgconn.PgError](err); !ok {
				return // the connection failed, or the opening ran out of time
			}
		}
		st.prepared = withCount(version, i+1)
	}
}

// readyWanted is how many connections keepStandbyReady keeps open on h:
// one per call waiting on a calls pool, up to failover_ready_conns and
// pool_max_conns.
func (s *Set) readyWanted(h *Host) int {
	return min(int(s.waits.onCalls.Load()), s.cfg.ReadyConns, int(h.Calls.Stat().MaxConns()))
}

// readyForPromotion has the likeliest replica to be promoted keep a
// connection open for each waiting call (keepStandbyReady). Each call
// calls it when it starts to wait, and every probe while calls wait:
// calls fail one after the other when a primary dies, and the probe of a
// standby spends most of a wait inside a watch, so the count its last
// probe saw is soon short.
func (s *Set) readyForPromotion() {
	if h := s.likeliestPromotion(); h != nil {
		s.keepStandbyReady(h)
	}
}

// DropUnusedStandbys is called by each call that waited, when it ends: once no
// call waits any more, the connections opened ahead of a promotion that
// did not come are closed (dropUnusedStandby) at once, not at their
// host's next probe, which can be health_probe_interval away.
func (s *Set) DropUnusedStandbys() {
	if s.waits.count.Load() > 0 {
		return
	}
	for _, hr := range s.state.Routes().Hosts {
		if hr.Entry != nil {
			s.dropUnusedStandby(hr.Entry)
		}
	}
}

// dropUnusedStandby ends what keepStandbyReady began once no call waits:
// when host h still does not take the Pool's calls, the connections opened
// there are closed. The pool's acquire check refuses them (standbyUsable),
// so acquiring every idle connection once closes them, with any other that
// the server has closed meanwhile.
func (s *Set) dropUnusedStandby(h *Host) {
	if h.readied.Load() == 0 || s.waits.count.Load() > 0 || h.opening.Load() {
		return
	}
	h.readied.Store(0)
	if s.canTake(h, s.cfg.Target) {
		return // promoted: the connections are the calls'
	}
	for _, c := range h.Calls.AcquireAllIdle(s.cfg.Life) {
		c.Release()
	}
}

// likeliestPromotion returns the replica a promotion is likeliest to
// pick: the one a topology source names the primary, else the one that
// has replayed the most WAL (the first in the table on a tie); nil when
// there is none, or when a promotion would not make a replica usable for
// the Pool's target (awaitsPromotion).
func (s *Set) likeliestPromotion() *Host {
	if !s.awaitsPromotion() {
		return nil
	}
	rs := s.state.Routes()
	var best *Host
	var bestClaimed bool
	var bestWAL uint64
	for i, hr := range rs.Hosts {
		st := rs.Health.Host(i)
		if hr.Entry == nil || st.Role != hosthealth.RoleReplica {
			continue
		}
		claimed, wal := st.Claimed == hosthealth.RolePrimary, uint64(hr.Fresh.Replayed)
		if best == nil || (claimed && !bestClaimed) || (claimed == bestClaimed && wal > bestWAL) {
			best, bestClaimed, bestWAL = hr.Entry, claimed, wal
		}
	}
	return best
}
