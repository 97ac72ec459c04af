package pgtest

import (
	"context"
	"strings"
	"syscall"
)

// Synchronous replication across the drills, kept as a failover manager
// would keep it: a primary's
// synchronous_standby_names names the standbys that follow it, "ANY 1
// (node1, node2)", and is empty when none does, so that a primary left
// without standbys keeps taking commits instead of waiting for one that
// will never come (as a Patroni leader in synchronous_mode, not strict,
// does). A standby's is empty; the harness sets it when it
// promotes the standby. Each node's value is written to its pgtest.conf,
// so Options.Settings and ALTER SYSTEM still override it.
//
// Who follows whom is the harness's own record (Node.follows), set when it
// makes a node a standby (configureStandby, Repoint) and cleared when it
// promotes one. A standby that is down stays in its primary's list: commits
// wait for another one, or for it to be back, as they would without the
// harness.

// setFollows records that n streams from upstream (nil: from none, as a
// primary).
func (c *Cluster) setFollows(n, upstream *Node) {
	c.mu.Lock()
	n.follows = upstream
	c.mu.Unlock()
}

// syncStandbyNames returns the synchronous_standby_names that n is to have:
// on a node that follows none, the standbys that follow it; else "".
func (c *Cluster) syncStandbyNames(n *Node) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.follows != nil {
		return ""
	}
	var names []string
	for _, r := range c.nodes {
		if r != n && r.follows == n {
			names = append(names, r.name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "ANY 1 (" + strings.Join(names, ", ") + ")"
}

// applySync gives p the synchronous_standby_names that syncStandbyNames
// says, when that changed: it rewrites p's pgtest.conf and, when p runs,
// makes it reload its configuration (SIGHUP to the postmaster, as
// pg_reload_conf does; a frozen server reloads once thawed). Commits that
// wait when the list empties are released at once.
func (c *Cluster) applySync(p *Node) error {
	if !c.opts.SyncReplication {
		return nil
	}
	want := c.syncStandbyNames(p)
	c.mu.Lock()
	same := p.syncNames == want
	c.mu.Unlock()
	if same {
		return nil
	}
	if err := p.writeConf(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil && !p.proc.exited() {
		if err := syscall.Kill(p.proc.pid, syscall.SIGHUP); err != nil {
			return p.errorf("reloading the configuration: %w", err)
		}
	}
	return nil
}

// standbysOf lists the nodes that are to follow p once it is promoted:
// every running standby but p and skip. A frozen node answers nothing and
// is left as it is.
func (c *Cluster) standbysOf(ctx context.Context, p, skip *Node) ([]*Node, error) {
	var rs []*Node
	for _, r := range c.nodes {
		if r == p || r == skip || !r.Running() || r.Frozen() {
			continue
		}
		standby, err := r.InRecovery(ctx)
		if err != nil {
			return nil, err
		}
		if standby {
			rs = append(rs, r)
		}
	}
	return rs, nil
}
