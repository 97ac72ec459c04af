package failovertest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// Node is one PostgreSQL server of a Cluster. Its name, address and data
// stay the same for the life of the cluster; its role changes with the
// faults.
type Node struct {
	c  *Cluster
	pn *pgtest.Node
	px proxy // zero without the Proxies option
}

// Name returns the node's name: node0, node1, ...
func (n *Node) Name() string { return n.pn.Name() }

// Addr returns the address clients dial, "127.0.0.1:port": the server's
// own, or with the Proxies option the proxy's in front of it.
func (n *Node) Addr() string {
	if a := n.px.addr(); a != "" {
		return a
	}
	return n.pn.Addr()
}

// Port returns the server's own TCP port on 127.0.0.1, the one
// current_setting('port') reports on a connection to it, so a test can
// tell which server answered. With the Proxies option it is not Addr's
// port: clients reach the server through the proxy's.
func (n *Node) Port() int { return n.pn.Port() }

// Zone returns the node's pgfailover.zone setting ("" when unset).
func (n *Node) Zone() string { return n.pn.Zone() }

// LogTail returns up to the last size bytes of the server's log, from the
// start of a line (nothing when size is not positive): what the server
// said while the test ran, across crashes and restarts, until the cluster
// is closed. A password of six bytes or more is masked. When a test fails, Start writes
// the last 4,000 bytes of every node's log to the test log itself.
func (n *Node) LogTail(size int) string { return n.pn.LogTail(size) }

// String returns the node's name and Addr.
func (n *Node) String() string {
	if n == nil {
		return "<nil>"
	}
	return n.Name() + "@" + n.Addr()
}

// ConnString returns a connection string for this node alone, like
// Cluster.ConnString.
func (n *Node) ConnString(params string) string {
	return n.c.pc.ConnStringAt([]string{n.Addr()}, n.c.params(params))
}

// Running reports whether the server runs (a frozen one does).
func (n *Node) Running() bool { return n.pn.Running() }

// InRecovery reports whether the server is a standby
// (pg_is_in_recovery()).
func (n *Node) InRecovery(ctx context.Context) (bool, error) { return n.pn.InRecovery(ctx) }

// Exec runs sql, one or more statements, as the superuser on a connection
// of its own to this server, past any proxy.
func (n *Node) Exec(ctx context.Context, sql string) error { return n.pn.Exec(ctx, sql) }

// Connect opens a connection of the test's own to this server as the
// superuser, past any proxy, for what Exec and Query do not serve: a
// session that holds a lock or a transaction open, LISTEN, or looking at
// other sessions. The caller closes it.
func (n *Node) Connect(ctx context.Context) (*pgx.Conn, error) { return n.pn.Connect(ctx) }

// Query runs a query as the superuser on a connection of its own to this
// server, past any proxy, and closes the connection when the rows are
// closed. It serves Ledger.Check.
func (n *Node) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	conn, err := n.pn.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return queryOwning(ctx, conn, n.Name(), sql, args)
}

// queryOwning runs a query on conn, which the rows then own: closing them
// closes it. On error conn is closed at once.
func queryOwning(ctx context.Context, conn *pgx.Conn, name, sql string, args []any) (pgx.Rows, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		_ = conn.Close(context.Background())
		return nil, fmt.Errorf("failovertest: %s: %w", name, err)
	}
	return &connRows{Rows: rows, conn: conn}, nil
}

// connRows closes its connection with the rows.
type connRows struct {
	pgx.Rows
	conn *pgx.Conn
}

func (r *connRows) Close() {
	r.Rows.Close()
	_ = r.conn.Close(context.Background())
}

// Crash stops the server at once with an immediate shutdown (SIGQUIT): no
// checkpoint, every session cut, clients see their connection end. The
// node stays down until Restart or, for a former primary, Rejoin. To crash
// the primary and promote a replica, use Failover.
func (n *Node) Crash(ctx context.Context) error {
	n.c.drill.Lock()
	defer n.c.drill.Unlock()
	return n.pn.Stop(ctx, pgtest.Immediate)
}

// Restart stops the server cleanly (fast shutdown: sessions end with
// SQLSTATE 57P01) and starts it again on the same port, in the role its
// data holds; a node that is down is only started. It returns once the
// server accepts connections. A former primary that a Failover left down
// comes back as a second primary: use Cluster.Rejoin to bring it back as a
// standby.
func (n *Node) Restart(ctx context.Context) error {
	n.c.drill.Lock()
	defer n.c.drill.Unlock()
	if err := n.pn.Stop(ctx, pgtest.Fast); err != nil {
		return err
	}
	return n.pn.Start(ctx)
}

// Stop stops the server cleanly with a fast shutdown, as an operator or a
// service manager does: open sessions end with SQLSTATE 57P01, a shutdown
// checkpoint is written and, on a primary, streamed to its standbys. The
// node stays down until Start. Stopping a node that is down does nothing.
// Stopping the primary promotes nothing: use Switchover to hand its role
// over, or Promote.
func (n *Node) Stop(ctx context.Context) error {
	n.c.drill.Lock()
	defer n.c.drill.Unlock()
	return n.pn.Stop(ctx, pgtest.Fast)
}

// Start starts a node that Stop or Crash left down, on the same port, in
// the role its data holds, and returns once it accepts connections. A
// standby streams again from the primary it followed; a former primary
// that a Failover left down comes back as a second primary (Cluster.Rejoin
// brings it back as a standby instead). Starting a node that runs is an
// error.
func (n *Node) Start(ctx context.Context) error {
	n.c.drill.Lock()
	defer n.c.drill.Unlock()
	return n.pn.Start(ctx)
}

// Freeze stops every process of the server with SIGSTOP, as a machine that
// hangs: open connections stay open and new ones are accepted by the
// kernel, but nothing answers, and standbys of a frozen primary receive no
// WAL. Thaw resumes it; Close thaws it. Freeze needs Linux.
func (n *Node) Freeze() error { return n.pn.Freeze() }

// Thaw resumes a server that Freeze stopped (SIGCONT). Thawing a node that
// is not frozen does nothing.
func (n *Node) Thaw() error { return n.pn.Thaw() }

// PauseReplay pauses WAL replay on a standby (pg_wal_replay_pause()): it
// keeps receiving WAL but applies none, so it lags on demand and reads on
// it go stale. A paused standby follows a new primary only after
// ResumeReplay.
func (n *Node) PauseReplay(ctx context.Context) error { return n.pn.PauseReplay(ctx) }

// ResumeReplay resumes WAL replay on a standby (pg_wal_replay_resume()).
func (n *Node) ResumeReplay(ctx context.Context) error { return n.pn.ResumeReplay(ctx) }
