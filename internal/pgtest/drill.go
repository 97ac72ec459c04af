package pgtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// pollInterval is how often the harness re-checks a condition it waits for.
const pollInterval = 5 * time.Millisecond

// poll runs check on one connection to n until it reports done, ctx ends or
// check fails. A lost connection is reopened.
func (n *Node) poll(ctx context.Context, what string, check func(context.Context, *pgx.Conn) (bool, error)) error {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	var last error
	for {
		if conn == nil {
			c, err := pgx.Connect(ctx, n.adminConnString())
			if err == nil {
				conn = c
			} else {
				last = err
			}
		}
		if conn != nil {
			ok, err := check(ctx, conn)
			if err == nil && ok {
				return nil
			}
			if err != nil {
				last = err
				if conn.IsClosed() {
					conn = nil
				}
			}
		}
		if err := Sleep(ctx, pollInterval); err != nil {
			if last != nil {
				return n.errorf("%s: %w (last error: %v)", what, err, last)
			}
			return n.errorf("%s: %w", what, err)
		}
	}
}

// waitStreaming waits until standby r streams from p on p's current timeline.
func (c *Cluster) waitStreaming(ctx context.Context, r, p *Node) error {
	tli, err := p.timeline(ctx)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("waiting for %s to stream from %s (timeline %d)", r.name, p.name, tli)
	return r.poll(ctx, what, func(ctx context.Context, conn *pgx.Conn) (bool, error) {
		return streamsFrom(ctx, conn, p, tli)
	})
}

// streamsFrom reports whether the standby behind conn streams from p on
// timeline tli.
func streamsFrom(ctx context.Context, conn *pgx.Conn, p *Node, tli int) (bool, error) {
	var (
		status string
		port   *int32
		recTLI *int32
	)
	err := conn.QueryRow(ctx, "SELECT status, sender_port, received_tli FROM pg_stat_wal_receiver").
		Scan(&status, &port, &recTLI)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // no WAL receiver at the moment
	}
	if err != nil {
		return false, err
	}
	return status == "streaming" && port != nil && int(*port) == p.port &&
		recTLI != nil && int(*recTLI) == tli, nil
}

// waitSyncStandby waits until primary p has a synchronous standby.
func (c *Cluster) waitSyncStandby(ctx context.Context, p *Node) error {
	return p.poll(ctx, "waiting for a synchronous standby", func(ctx context.Context, conn *pgx.Conn) (bool, error) {
		var n int
		err := conn.QueryRow(ctx,
			"SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')").Scan(&n)
		return n > 0, err
	})
}

// Promote promotes the standby n (pg_promote), waits until it accepts
// writes and makes it the cluster's primary. Promoting the primary only
// marks it as such. With SyncReplication, n's synchronous standbys are the
// standbys that follow it, none at first: it takes commits at once, and
// each standby that Repoint (or FollowAll) points at it is added.
// PromoteAndFollow does both steps with no such gap.
func (c *Cluster) Promote(ctx context.Context, n *Node) error {
	return c.promote(ctx, n, nil)
}

// PromoteAndFollow promotes the standby n as Promote does and points every
// other running standby at it as FollowAll does. With SyncReplication,
// those standbys are n's synchronous standbys from the moment it leaves
// recovery, so that no commit is acknowledged before one of them has it;
// with none left, n's commits wait for no standby.
func (c *Cluster) PromoteAndFollow(ctx context.Context, n *Node) error {
	followers, err := c.standbysOf(ctx, n, nil)
	if err != nil {
		return err
	}
	if err := c.promote(ctx, n, followers); err != nil {
		return err
	}
	return c.FollowAll(ctx, n)
}

// promote promotes n, giving it followers as its synchronous standbys
// before it leaves recovery (see syncrep.go); the caller points them at n.
func (c *Cluster) promote(ctx context.Context, n *Node, followers []*Node) error {
	if !n.Running() {
		return fmt.Errorf("%w: cannot promote %s", ErrStopped, n.name)
	}
	inRecovery, err := n.InRecovery(ctx)
	if err != nil {
		return err
	}
	if inRecovery {
		c.setFollows(n, nil)
		for _, f := range followers {
			c.setFollows(f, n)
		}
		if err := c.applySync(n); err != nil {
			return err
		}
		var promoted bool
		if err := n.queryRow(ctx, "SELECT pg_promote(true, 60)", &promoted); err != nil {
			return n.errorf("promote: %w", err)
		}
		if !promoted {
			return n.errorf("promote: pg_promote returned false")
		}
		err := n.poll(ctx, "waiting for promotion to finish", func(ctx context.Context, conn *pgx.Conn) (bool, error) {
			var ro bool
			err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&ro)
			return !ro, err
		})
		if err != nil {
			return err
		}
		// After promotion the server only requests a spread checkpoint, and
		// until one completes its control file still names the old timeline.
		// pg_rewind reads the timeline from there, so a rewind against this
		// server would wrongly find "no rewind required".
		if err := n.Exec(ctx, "CHECKPOINT"); err != nil {
			return err
		}
	}
	c.setPrimary(n)
	return nil
}

// Repoint makes the running standby replica stream from primary: ALTER
// SYSTEM SET primary_conninfo and pg_reload_conf(), then it waits until the
// standby streams from primary on primary's timeline. If the standby's replay
// is paused, it cannot switch before ResumeReplay, so Repoint returns without
// waiting (WaitReplicated waits for it after the resume). A standby that has
// replayed WAL past the point where primary's timeline branched off cannot
// follow it (Repoint then waits until ctx ends); Rejoin rewinds such a node.
func (c *Cluster) Repoint(ctx context.Context, replica, primary *Node) error {
	if replica == primary {
		return fmt.Errorf("pgtest: cannot repoint %s to itself", replica.name)
	}
	if !replica.Running() {
		return fmt.Errorf("%w: cannot repoint %s", ErrStopped, replica.name)
	}
	sql := "ALTER SYSTEM SET primary_conninfo = " + sqlLiteral(replica.primaryConnInfo(primary))
	if err := replica.Exec(ctx, sql); err != nil {
		return err
	}
	c.setFollows(replica, primary)
	if err := replica.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	// A standby whose replay is paused restarts its WAL receiver only when
	// replay resumes; waiting for it here would wait for ResumeReplay.
	var paused bool
	if err := replica.queryRow(ctx, "SELECT pg_is_wal_replay_paused()", &paused); err != nil {
		return err
	}
	if !paused {
		if err := c.waitStreaming(ctx, replica, primary); err != nil {
			return err
		}
	}
	return c.applySync(primary)
}

// Switchover hands the primary role to the standby to: the primary is
// stopped (fast, so connected standbys receive all of its WAL), to is
// promoted, the other running standbys are re-pointed to it, and the old
// primary comes back as a standby of to.
func (c *Cluster) Switchover(ctx context.Context, to *Node) error {
	old := c.Primary()
	if to == old {
		return fmt.Errorf("pgtest: %s is already the primary", to.name)
	}
	if !to.Running() {
		return fmt.Errorf("%w: cannot switch over to %s", ErrStopped, to.name)
	}
	if err := old.Stop(ctx, Fast); err != nil {
		return err
	}
	if err := c.promoteFollowed(ctx, to, old); err != nil {
		return err
	}
	return c.Rejoin(ctx, old, to)
}

// Failover simulates losing the primary: it is stopped immediately (no
// hand-over), to is promoted and the other running standbys follow it. The
// old primary stays down; Rejoin brings it back as a standby.
func (c *Cluster) Failover(ctx context.Context, to *Node) error {
	old := c.Primary()
	if to == old {
		return fmt.Errorf("pgtest: %s is already the primary", to.name)
	}
	if !to.Running() {
		return fmt.Errorf("%w: cannot fail over to %s", ErrStopped, to.name)
	}
	if err := old.Stop(ctx, Immediate); err != nil {
		return err
	}
	return c.promoteFollowed(ctx, to, old)
}

// promoteFollowed promotes to and points every running standby but old at
// it, those standbys being its synchronous standbys from the start.
func (c *Cluster) promoteFollowed(ctx context.Context, to, old *Node) error {
	followers, err := c.standbysOf(ctx, to, old)
	if err != nil {
		return err
	}
	if err := c.promote(ctx, to, followers); err != nil {
		return err
	}
	return c.followAll(ctx, to, old)
}

// FailoverToBest simulates losing the primary the way a failover manager
// handles it: the primary is stopped immediately, nothing is promoted for
// promoteAfter, then the standby that received the most WAL is promoted (so
// no commit acknowledged under synchronous replication is lost), and the
// other standbys follow it. It returns the new primary.
func (c *Cluster) FailoverToBest(ctx context.Context, promoteAfter time.Duration) (*Node, error) {
	old := c.Primary()
	if err := old.Stop(ctx, Immediate); err != nil {
		return nil, err
	}
	if err := Sleep(ctx, promoteAfter); err != nil {
		return nil, fmt.Errorf("pgtest: waiting to promote: %w", err)
	}
	best, err := c.BestStandby(ctx)
	if err != nil {
		return nil, err
	}
	return best, c.promoteFollowed(ctx, best, old)
}

// BestStandby returns the running standby that has received the most WAL:
// the one to promote when the primary is lost.
func (c *Cluster) BestStandby(ctx context.Context) (*Node, error) {
	var best *Node
	var bestLSN uint64
	for _, r := range c.Replicas() {
		if !r.Running() {
			continue
		}
		var pos *string
		if err := r.queryRow(ctx, "SELECT pg_last_wal_receive_lsn()::text", &pos); err != nil {
			return nil, err
		}
		var v uint64
		if pos != nil {
			var err error
			if v, err = parseLSN(*pos); err != nil {
				return nil, fmt.Errorf("pgtest: %s: %w", r.name, err)
			}
		}
		if best == nil || v > bestLSN {
			best, bestLSN = r, v
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%w: no standby left to promote", ErrStopped)
	}
	return best, nil
}

// FollowAll points every running standby at the new primary p, rewinding
// those that went past the point where p's timeline branched off.
func (c *Cluster) FollowAll(ctx context.Context, p *Node) error {
	return c.followAll(ctx, p, nil)
}

// followAll points every running standby except skip at the new primary p.
// A running node that is not in recovery (an old primary that still runs)
// is no standby and is left as it is, and so is a frozen node. The standbys followed p's parent
// timeline; one that received WAL past the branch point could not follow
// and is rewound (stopped, pg_rewind, restarted).
func (c *Cluster) followAll(ctx context.Context, p, skip *Node) error {
	h, err := p.history(ctx)
	if err != nil {
		return err
	}
	for _, r := range c.nodes {
		if r == p || r == skip || !r.Running() || r.Frozen() {
			continue // a frozen node answers nothing; its role is left as it is
		}
		if standby, err := r.InRecovery(ctx); err != nil {
			return err
		} else if !standby {
			continue
		}
		if err := c.detachIfUpstreamRuns(ctx, r, p); err != nil {
			return err
		}
		var pos *string
		err := r.queryRow(ctx, "SELECT GREATEST(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::text", &pos)
		if err != nil {
			return err
		}
		ahead := false
		if pos != nil && h.parent != 0 {
			v, err := parseLSN(*pos)
			if err != nil {
				return fmt.Errorf("pgtest: %s: %w", r.name, err)
			}
			ahead = h.diverged(h.parent, v)
		}
		if ahead {
			if err := r.Stop(ctx, Fast); err != nil {
				return err
			}
			err = c.rewind(ctx, r, p)
		} else {
			err = c.Repoint(ctx, r, p)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// detachIfUpstreamRuns stops the standby r from streaming when a primary
// other than p still runs: otherwise that primary could send r WAL past
// p's branch point between the look at r's position and its repointing,
// and r could not follow p. r streams again once repointed.
func (c *Cluster) detachIfUpstreamRuns(ctx context.Context, r, p *Node) error {
	upstream := false
	for _, n := range c.nodes {
		if n == p || n == r || !n.Running() {
			continue
		}
		if n.Frozen() { // it may be a primary, and send WAL once thawed
			upstream = true
			continue
		}
		standby, err := n.InRecovery(ctx)
		if err != nil {
			return err
		}
		upstream = upstream || !standby
	}
	if !upstream {
		return nil
	}
	if err := r.Exec(ctx, "ALTER SYSTEM SET primary_conninfo = ''"); err != nil {
		return err
	}
	if err := r.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	return r.poll(ctx, "waiting for "+r.name+" to stop streaming", func(ctx context.Context, conn *pgx.Conn) (bool, error) {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_wal_receiver").Scan(&n)
		return n == 0, err
	})
}

// WaitReplicated waits until every running standby has replayed the WAL the
// primary had written when WaitReplicated was called. Running nodes that are
// not in recovery are not standbys and are skipped. A standby with replay
// paused holds WaitReplicated until ctx ends.
func (c *Cluster) WaitReplicated(ctx context.Context) error {
	p := c.Primary()
	if !p.Running() {
		return fmt.Errorf("%w: primary %s", ErrStopped, p.name)
	}
	var s string
	if err := p.queryRow(ctx, "SELECT pg_current_wal_lsn()::text", &s); err != nil {
		return err
	}
	target, err := parseLSN(s)
	if err != nil {
		return fmt.Errorf("pgtest: %s: %w", p.name, err)
	}
	what := "waiting for replay of " + formatLSN(target) + " from " + p.name
	for _, r := range c.nodes {
		if r == p || !r.Running() {
			continue
		}
		err := r.poll(ctx, what, func(ctx context.Context, conn *pgx.Conn) (bool, error) {
			var replay *string
			var inRecovery bool
			err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text").
				Scan(&inRecovery, &replay)
			if err != nil || !inRecovery {
				return !inRecovery, err
			}
			if replay == nil {
				return false, nil
			}
			v, err := parseLSN(*replay)
			return v >= target, err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
