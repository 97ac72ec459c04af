package engine

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/internal/backoff"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/replica"
)

// The checks a Reader's read makes on the connection it got, one round
// trip each: how far the replica at its other end has replayed, and,
// behind a name that spreads connections over servers, whether the
// server it reached is fresh enough for the read.

// replayed reports whether the replica h at the other end of conn has
// replayed position want, which read c must see, asking it: one round
// trip on the replica. When it has not, it is asked again, every few
// hundred microseconds, while the read has waited less than replica_wait
// in all (across the replicas it asks); waited says whether it did; got
// is the last position it said. What the replica says also moves its
// known position on for every read, when it is the server h's freshness
// describes (hoststate.Observation.Server).
func (r *Reader) replayed(c *call, h *hostpool.Host, conn *pgxpool.Conn, want replica.LSN) (got replica.LSN, ok, waited bool) {
	for n := 1; ; n, waited = n+1, true {
		got, ok := r.replayPosition(c.ctx, h, conn)
		if !ok {
			return got, false, waited
		}
		if got >= want {
			return got, true, waited
		}
		if !r.pause(c, replayPolls.Base(n)) {
			return got, false, waited
		}
	}
}

// elsewhere reports whether conn, a connection of the Reader's to host
// h, reached another server than the one h's probe describes: behind a
// name that spreads connections over several servers (a reader endpoint),
// what the Pool knows of h's freshness is not about conn's server.
func (r *Reader) elsewhere(h *hostpool.Host, conn *pgxpool.Conn) bool {
	return !r.e.Hosts.OnProbedServer(h, hostpool.StateOf(conn.Conn().PgConn()))
}

// confirmElsewhere judges read c on conn itself, a connection to h that
// reached another server than the one h's freshness describes
// (elsewhere): a read that must see a position takes conn only once its
// server has replayed it (asked on conn, as confirm does), and with
// max_lag only when what that server has replayed is recent enough; a
// read under the outage rule does not take it. It returns whether the
// read takes conn; if not, h is passed over for the read.
func (r *Reader) confirmElsewhere(c *call, h *hostpool.Host, conn *pgxpool.Conn) bool {
	maxLag := r.router.Policy.MaxLag
	// A read pinned without a position must go to the primary itself,
	// which this connection did not reach.
	ok, waited := !c.reason.InOutage() && c.after != UnknownPosition, false
	if ok && (c.after != 0 || maxLag > 0) {
		var got replica.LSN
		got, ok, waited = r.replayed(c, h, conn, c.after)
		if ok && maxLag > 0 {
			fresh, known := r.e.State.Reached(got)
			ok = known && r.e.Clock.Now().Sub(fresh) <= maxLag
		}
	}
	switch {
	case !ok:
		ev := c.events()
		ev.behind = append(ev.behind, h.Addr)
	case c.after == 0:
	case waited:
		c.reason = replica.Waited
	default:
		c.reason = replica.CaughtUp
	}
	return ok
}

// pause waits delay before read c asks a replica again, or what is left
// of replica_wait for it when that is less, and counts the wait against
// it. It reports false, without waiting, when nothing is left, and when
// the read's context ends.
func (r *Reader) pause(c *call, delay time.Duration) bool {
	left := r.wait - c.replaySpent()
	if left <= 0 {
		return false
	}
	clk := r.e.Clock
	began := clk.Now()
	t := clk.NewTimer(min(delay, left))
	select {
	case <-t.C():
	case <-c.ctx.Done():
		t.Stop()
		return false
	}
	c.events().spent += clk.Now().Sub(began)
	return true
}

// replayPolls are the pauses between two questions to a replica that has
// not yet replayed a read's position (or seen its sender go, see look), on
// the module's one curve: a replica streaming from a busy primary is
// usually a fraction of a millisecond behind. Without jitter: they are one
// read's questions on its own connection.
var replayPolls = backoff.Exponential{Initial: 200 * time.Microsecond, Max: 2 * time.Millisecond}

// replayPosition asks the replica h at the other end of conn how far it
// has replayed, and records it.
func (r *Reader) replayPosition(ctx context.Context, h *hostpool.Host, conn *pgxpool.Conn) (replica.LSN, bool) {
	var text *string
	if err := conn.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn()::text").Scan(&text); err != nil || text == nil {
		return 0, false
	}
	got, err := replica.ParseLSN(*text)
	if err != nil {
		return 0, false
	}
	r.e.Hosts.Observe(h, hoststate.Observation{Kind: hoststate.Replayed, LSN: got, Server: hostpool.StateOf(conn.Conn().PgConn()).Server})
	return got, true
}
