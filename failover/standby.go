package failover

import (
	"context"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// While calls wait for a primary, the replica most likely to be promoted
// gets one connection in its calls pool opened ahead of the promotion: a
// session on a standby stays open when its server is promoted and takes
// writes from then on, so the first call after the probe sees the
// promotion finds a connection there instead of waiting for a login (tens
// of milliseconds, more on a loaded machine). It is one connection per
// Pool on one replica, opened when the wait is first watched: what every
// instance of a fleet would open on the new primary a moment later anyway.
//
// The connection is marked standby in its connState. The acquire check
// hands it out once to the acquire that opened it, and after that only
// while the routing state takes the host for the Pool's target, that is,
// once a probe has seen the promotion; until its next statement the
// session still reports in_hot_standby=on. A statement the server still
// refuses as read-only is a refusal before it ran, retried as any other.
// When the wait ends without a promotion, the probe loop lets the pool
// check its idle connections, which closes it.

// standbyKey marks the context of the acquire that opens a connection to
// a standby ahead of its promotion.
type standbyKey struct{}

// openingStandby reports whether ctx is that acquire's.
func openingStandby(ctx context.Context) bool {
	v, _ := ctx.Value(standbyKey{}).(bool)
	return v
}

// standbyUsable reports whether an idle connection opened on host h while
// it was a standby may be handed out: to the acquire that opened it (its
// first), and then only once the host takes the Pool's calls.
func (p *Pool) standbyUsable(h *hostPool, st *connState) bool {
	if !st.standbyHanded {
		st.standbyHanded = true
		return true
	}
	return p.canTake(h, p.cfg.Target)
}

// keepStandbyReady opens, in the background, the one connection to host h
// that waits for its promotion, once per wait, when h is the likeliest
// replica to be promoted (see likeliestPromotion).
func (p *Pool) keepStandbyReady(h *hostPool) {
	if !p.likeliestPromotion(h) || !h.readied.CompareAndSwap(false, true) {
		return
	}
	h.opening.Store(true)
	p.bg.Go(func() {
		defer h.opening.Store(false)
		ctx, cancel := context.WithTimeout(context.WithValue(p.life, standbyKey{}, true), p.probeTimeout())
		defer cancel()
		if conn, err := h.pool.Acquire(ctx); err == nil {
			conn.Release()
		}
	})
}

// dropUnusedStandby ends what keepStandbyReady began once no call waits:
// when host h still does not take the Pool's calls, the connection opened
// there is closed. The pool's acquire check refuses it (standbyUsable), so
// acquiring every idle connection once closes it, with any other that the
// server has closed meanwhile.
func (p *Pool) dropUnusedStandby(h *hostPool) {
	if !h.readied.Load() || p.waiting.Load() > 0 || h.opening.Load() {
		return
	}
	h.readied.Store(false)
	if p.canTake(h, p.cfg.Target) {
		return // promoted: the connection is in use
	}
	for _, c := range h.pool.AcquireAllIdle(p.life) {
		c.Release()
	}
}

// likeliestPromotion reports whether host h is the replica a promotion is
// likeliest to pick: the one a topology source names the primary, else
// the one that has replayed the most WAL (the first in the table on a
// tie). Only replicas count that the Pool's target would take once
// promoted.
func (p *Pool) likeliestPromotion(h *hostPool) bool {
	rs := p.routes.Load()
	var best *hostPool
	var bestClaimed bool
	var bestWAL uint64
	for i, hr := range rs.hosts {
		st := rs.health.Host(i)
		if hr.pool == nil || st.Role != hosthealth.RoleReplica {
			continue
		}
		claimed, wal := st.Claimed == hosthealth.RolePrimary, uint64(hr.fresh.Replayed)
		if best == nil || (claimed && !bestClaimed) || (claimed == bestClaimed && wal > bestWAL) {
			best, bestClaimed, bestWAL = hr.pool, claimed, wal
		}
	}
	return best == h
}
