package failovertest

import (
	"context"
	"time"

	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// CrashPrimary crashes the primary (immediate shutdown, see Node.Crash)
// and returns it. Nothing is promoted: the cluster has no primary until
// Promote. Failover does both with a chosen gap.
func (c *Cluster) CrashPrimary(ctx context.Context) (*Node, error) {
	c.drill.Lock()
	defer c.drill.Unlock()
	old := c.pc.Primary()
	if err := old.Stop(ctx, pgtest.Immediate); err != nil {
		return nil, err
	}
	return c.by[old], nil
}

// Failover is losing the primary as a failover manager handles it: the
// primary crashes (immediate shutdown), nothing is promoted for
// promoteAfter, then the standby that received the most WAL is promoted
// and the other running standbys follow it. It returns the new primary
// once it accepts writes and the others stream from it. The old primary
// stays down; Rejoin brings it back as a standby.
//
// promoteAfter is the scenario, not a wait for anything: a promotion
// 100 ms after the crash and one 10 s after it test different things (in
// the second, calls give up or wait, depending on the Pool's
// failover_max_duration).
func (c *Cluster) Failover(ctx context.Context, promoteAfter time.Duration) (*Node, error) {
	c.drill.Lock()
	defer c.drill.Unlock()
	defer c.drilled() // before the unlock: moves the endpoints that follow drills
	best, err := c.pc.FailoverToBest(ctx, promoteAfter)
	if err != nil {
		return nil, err
	}
	return c.by[best], nil
}

// BestStandby returns the running standby that received the most WAL: the
// one a failover manager promotes, so that with SyncReplication no
// acknowledged commit is lost.
func (c *Cluster) BestStandby(ctx context.Context) (*Node, error) {
	best, err := c.pc.BestStandby(ctx)
	if err != nil {
		return nil, err
	}
	return c.by[best], nil
}

// Promote promotes the standby n (pg_promote), waits until it accepts
// writes and points every other running standby at it. The old primary is
// left as it is: if it still runs, there are two primaries, as after a
// network partition, until it is stopped or rejoined.
func (c *Cluster) Promote(ctx context.Context, n *Node) error {
	pn, err := c.node(n)
	if err != nil {
		return err
	}
	c.drill.Lock()
	defer c.drill.Unlock()
	defer c.drilled() // before the unlock: moves the endpoints that follow drills
	return c.promote(ctx, pn)
}

func (c *Cluster) promote(ctx context.Context, pn *pgtest.Node) error {
	return c.pc.PromoteAndFollow(ctx, pn)
}

// Switchover hands the primary role to the standby to cleanly, as a
// planned maintenance does: the primary stops with a fast shutdown
// (sessions end with SQLSTATE 57P01, standbys receive all of its WAL), to
// is promoted, the other standbys follow it and the old primary comes back
// as its standby. A nil to means BestStandby. It returns the new primary.
func (c *Cluster) Switchover(ctx context.Context, to *Node) (*Node, error) {
	if to == nil {
		var err error
		if to, err = c.BestStandby(ctx); err != nil {
			return nil, err
		}
	}
	pn, err := c.node(to)
	if err != nil {
		return nil, err
	}
	c.drill.Lock()
	defer c.drill.Unlock()
	defer c.drilled() // before the unlock: moves the endpoints that follow drills
	if err := c.pc.Switchover(ctx, pn); err != nil {
		return nil, err
	}
	return to, nil
}

// Rejoin brings n, typically the primary a Failover or CrashPrimary left
// down, back as a standby of the current primary and waits until it
// streams. A node holding WAL the new primary never had (commits that were
// never replicated) is rewound with pg_rewind first, and those commits are
// gone, as in a real failover.
func (c *Cluster) Rejoin(ctx context.Context, n *Node) error {
	pn, err := c.node(n)
	if err != nil {
		return err
	}
	c.drill.Lock()
	defer c.drill.Unlock()
	defer c.drilled() // before the unlock: moves the endpoints that follow drills
	return c.pc.Rejoin(ctx, pn, c.pc.Primary())
}
