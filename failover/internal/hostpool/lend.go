package hostpool

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/internal/telemetry"
)

// lend lends host h's probe an idle connection of its pools, the calls'
// first: an idle Pool then holds one connection on the host, which its
// calls and its probe share. ok is false when neither pool has an idle
// connection on the server the probe last reached (when known); lend
// opens none. A call that finds no idle connection while the probe holds
// the loan makes its pool open another; when the pool is idle again as
// the loan comes back, the loan is closed (giveBack), so a probe leaves an
// idle Pool no larger than it found it.
func (s *Set) lend(ctx context.Context, h *Host) (loan probe.Loan, ok bool) {
	for _, p := range [...]*pgxpool.Pool{h.Calls, h.Reads} {
		st := p.Stat()
		if st.IdleConns() == 0 {
			continue
		}
		size := st.TotalConns()
		var lent *pgxpool.Conn
		for _, c := range p.AcquireAllIdle(context.WithValue(ctx, lendKey{}, true)) {
			// Behind a name that spreads connections over servers, one on
			// the server the host's probe describes keeps that view.
			if lent == nil && s.OnProbedServer(h, StateOf(c.Conn().PgConn())) {
				lent = c
				continue
			}
			c.Release()
		}
		if lent != nil {
			pc := lent.Conn().PgConn()
			return probe.Loan{Conn: pc, Prepared: &StateOf(pc).probed, Return: func() { s.giveBack(h, p, lent, size) }}, true
		}
	}
	return probe.Loan{}, false
}

// giveBack ends the probe's loan of c, a connection of host h's pool p,
// which held size connections when the loan began: c goes back to p,
// unless p has grown since (a call found no idle connection meanwhile and
// opened one) and nothing but the loan is in use, when c is closed
// instead, and p is back to its size. A pool at work keeps what it
// opened, or each probe could cost it a login.
func (s *Set) giveBack(h *Host, p *pgxpool.Pool, c *pgxpool.Conn, size int32) {
	if st := p.Stat(); st.TotalConns() <= size || st.AcquiredConns() > 1 || c.Conn().IsClosed() {
		c.Release()
		return
	}
	s.cfg.Telemetry.Closed(h.Server, telemetry.ClosedSurplus, 1)
	conn := c.Hijack()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn.Close(ctx)
}

// lendKey marks the context of lend's acquires: the connection goes to
// the probe, not to the user's code, so the user's PrepareConn is not
// called for it.
type lendKey struct{}
