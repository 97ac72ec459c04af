package failovertest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// ErrNoPatroni is wrapped by the error of NewPatroni (and the failure of
// StartPatroni) when the patroni, patronictl or etcd program cannot be
// found or installed. The error's text ends with the command that installs
// them on this system.
var ErrNoPatroni = pgtest.ErrNoPatroni

// PatroniCluster is a real Patroni cluster on loopback: one etcd and a
// Patroni process per server, each running its PostgreSQL, all children of
// the test. Unlike Cluster, the harness does not decide who leads:
// Patroni does, with its leader lock (ttl 10 s, loop_wait 1 s), so the
// timing of a failover is Patroni's own.
//
// Its methods are safe for concurrent use; the faults take turns.
type PatroniCluster struct {
	pc      *pgtest.PatroniCluster
	members []*Member
	by      map[*pgtest.PatroniMember]*Member

	// drill makes the faults take turns. It is held across their I/O, and
	// nothing else is guarded by it.
	drill sync.Mutex
}

// Member is one member of a PatroniCluster: a Patroni process and the
// PostgreSQL server it runs.
type Member struct {
	c  *PatroniCluster
	pm *pgtest.PatroniMember
}

// StartPatroni starts a Patroni cluster for the test t and stops it when
// the test ends. It fails the test at once when the cluster cannot start,
// unless the programs cannot be had and SkipUnavailable or
// $PGTEST_SKIP_UNAVAILABLE says to skip (as for Start). When the test has
// failed, the end of every member's log, and of etcd's, is written to the
// test log; Member.LogTail reads it at any time.
//
// Replicas(n) gives n+1 members, one replica by default; with
// SyncReplication, Patroni's synchronous_mode is on, and only the
// synchronous standby is promoted. Zones, Password and SkipUnavailable
// apply as for Start; TLS, Setting and Proxies are not available. It
// returns once every member streams from one leader.
//
// It needs the programs patroni, patronictl and etcd in PATH besides
// PostgreSQL's; they are installed like those where that can be done
// (Debian and Ubuntu: apt-get install patroni etcd-server), unless
// $PGTEST_INSTALL is 0.
func StartPatroni(t testing.TB, opts ...Option) *PatroniCluster {
	t.Helper()
	po, err := patroniOptions(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	pc, err := pgtest.NewPatroni(ctx, po)
	if err != nil {
		failStart(t, newOptions(opts), err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			pc.LogTails(t)
		}
		if err := pc.Close(); err != nil {
			t.Error(err)
		}
	})
	return wrapPatroni(pc)
}

// NewPatroni is StartPatroni for a program: call Close when done. When
// Patroni or etcd cannot be had, the error wraps ErrNoPatroni.
func NewPatroni(ctx context.Context, opts ...Option) (*PatroniCluster, error) {
	o, err := patroniOptions(opts)
	if err != nil {
		return nil, err
	}
	pc, err := pgtest.NewPatroni(ctx, o)
	if err != nil {
		return nil, err
	}
	return wrapPatroni(pc), nil
}

func patroniOptions(opts []Option) (pgtest.PatroniOptions, error) {
	o := newOptions(opts)
	var unavailable []string
	if o.pg.TLS {
		unavailable = append(unavailable, "TLS")
	}
	if len(o.pg.Settings) > 0 {
		unavailable = append(unavailable, "Setting")
	}
	if o.proxies {
		unavailable = append(unavailable, "Proxies")
	}
	if len(unavailable) > 0 {
		return pgtest.PatroniOptions{}, fmt.Errorf("failovertest: %v not available with Patroni", unavailable)
	}
	if o.pg.Replicas < 0 {
		return pgtest.PatroniOptions{}, fmt.Errorf("failovertest: Replicas = %d, want >= 0", o.pg.Replicas)
	}
	return pgtest.PatroniOptions{
		Members:  o.pg.Replicas + 1,
		Async:    !o.pg.SyncReplication,
		Zones:    o.pg.Zones,
		Password: o.pg.Password,
	}, nil
}

func wrapPatroni(pc *pgtest.PatroniCluster) *PatroniCluster {
	c := &PatroniCluster{pc: pc, by: map[*pgtest.PatroniMember]*Member{}}
	for _, pm := range pc.Members() {
		m := &Member{c: c, pm: pm}
		c.members = append(c.members, m)
		c.by[pm] = m
	}
	return c
}

// Close stops every process of the cluster and removes its files.
// StartPatroni's cleanup calls it. It is safe to call more than once.
func (c *PatroniCluster) Close() error { return c.pc.Close() }

// Members returns the members in creation order: member0, member1, ...
func (c *PatroniCluster) Members() []*Member { return append([]*Member(nil), c.members...) }

// ConnString returns a multi-host connection string over every member's
// PostgreSQL, like Cluster.ConnString.
func (c *PatroniCluster) ConnString(params string) string { return c.pc.ConnString(params) }

// Password returns the password of the superuser "postgres": the one
// Password set, else DefaultPassword. ConnString carries it; a connection
// string that names no host, with the hosts coming from patroni_api_urls,
// needs it spelled out.
func (c *PatroniCluster) Password() string { return c.pc.Password() }

// APIURLs returns the base URL of every member's Patroni REST API
// (http://127.0.0.1:port), for the Pool's patroni_api_urls.
func (c *PatroniCluster) APIURLs() []string { return c.pc.APIURLs() }

// Leader returns the member Patroni shows as leader (GET /cluster).
// Right after a fault that may be a leader whose server is gone; the
// faults return the new leader once it accepts writes.
func (c *PatroniCluster) Leader(ctx context.Context) (*Member, error) {
	pm, err := c.pc.Leader(ctx)
	if err != nil {
		return nil, err
	}
	return c.by[pm], nil
}

// Switchover asks Patroni for a planned switchover (patronictl
// switchover) to the synchronous standby, or without SyncReplication to
// the first running replica, and returns once the new leader accepts
// writes. The old leader shuts down fast (its sessions end with SQLSTATE
// 57P01) and Patroni brings it back as a replica; WaitHealthy waits for
// that.
func (c *PatroniCluster) Switchover(ctx context.Context) (from, to *Member, err error) {
	c.drill.Lock()
	defer c.drill.Unlock()
	old, _, err := c.pc.Switchover(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c.waitNewLeader(ctx, old)
}

// CrashLeader kills the leader's postmaster (SIGKILL) and returns once
// Patroni has promoted another member and it accepts writes. Patroni on
// the old leader gives up the lock rather than restart the server in
// place, and brings it back as a replica (rewound if need be) by itself;
// WaitHealthy waits for that.
func (c *PatroniCluster) CrashLeader(ctx context.Context) (from, to *Member, err error) {
	c.drill.Lock()
	defer c.drill.Unlock()
	old, err := c.pc.KillLeaderPostmaster(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c.waitNewLeader(ctx, old)
}

// LoseLeader kills the leader as a lost machine dies: its Patroni and
// every process of its PostgreSQL, with SIGKILL. Nothing releases the
// leader lock, so Patroni promotes another member only once it expires
// (about ttl, 10 s); LoseLeader returns when that member accepts writes.
// The lost member stays down until Restart.
func (c *PatroniCluster) LoseLeader(ctx context.Context) (from, to *Member, err error) {
	c.drill.Lock()
	defer c.drill.Unlock()
	old, err := c.pc.KillLeaderNode(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c.waitNewLeader(ctx, old)
}

func (c *PatroniCluster) waitNewLeader(ctx context.Context, old *pgtest.PatroniMember) (from, to *Member, err error) {
	next, err := c.pc.WaitNewLeader(ctx, old)
	if err != nil {
		return c.by[old], nil, err
	}
	return c.by[old], c.by[next], nil
}

// Restart starts Patroni again on a member that LoseLeader took down and
// returns once its REST API answers; Patroni then recovers its server and
// rejoins it as a replica, which WaitHealthy waits for.
func (c *PatroniCluster) Restart(ctx context.Context, m *Member) error {
	if m == nil || m.c != c {
		return fmt.Errorf("failovertest: %v is not a member of this cluster", m)
	}
	c.drill.Lock()
	defer c.drill.Unlock()
	return c.pc.RestartMember(ctx, m.pm)
}

// WaitHealthy waits until every member runs and streams from one leader
// with little lag (and, with SyncReplication, one is the synchronous
// standby), or returns what was still wrong when ctx ended.
func (c *PatroniCluster) WaitHealthy(ctx context.Context) error { return c.pc.WaitHealthy(ctx) }

// Name returns the member's Patroni name: member0, member1, ...
func (m *Member) Name() string { return m.pm.Name() }

// Addr returns the address of the member's PostgreSQL, "127.0.0.1:port".
func (m *Member) Addr() string { return m.pm.Addr() }

// APIURL returns the base URL of the member's Patroni REST API.
func (m *Member) APIURL() string { return m.pm.APIURL() }

// Zone returns the member's pgfailover.zone setting ("" when unset).
func (m *Member) Zone() string { return m.pm.Zone() }

// LogTail returns up to the last size bytes of the member's log, from the
// start of a line (nothing when size is not positive): Patroni's output
// and that of the PostgreSQL server it runs, in one file, until the
// cluster is closed. A password of six bytes or more is masked. When a test
// fails, StartPatroni writes the end of every member's log, and of etcd's,
// to the test log itself.
func (m *Member) LogTail(size int) string { return m.pm.LogTail(size) }

// String returns the member's name and Addr.
func (m *Member) String() string {
	if m == nil {
		return "<nil>"
	}
	return m.Name() + "@" + m.Addr()
}

// ConnString returns a connection string for this member's PostgreSQL
// alone, like Cluster.ConnString.
func (m *Member) ConnString(params string) string { return m.pm.ConnString(params) }

// InRecovery reports whether the member's PostgreSQL is a standby. The
// server's word wins over the role Patroni shows.
func (m *Member) InRecovery(ctx context.Context) (bool, error) { return m.pm.InRecovery(ctx) }

// Exec runs sql, one or more statements, as the superuser on a connection
// of its own to the member's PostgreSQL.
func (m *Member) Exec(ctx context.Context, sql string) error { return m.pm.Exec(ctx, sql) }

// Query runs a query as the superuser on a connection of its own to the
// member's PostgreSQL and closes the connection when the rows are closed.
// It serves Ledger.Check.
func (m *Member) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	conn, err := pgx.Connect(ctx, m.ConnString(""))
	if err != nil {
		return nil, fmt.Errorf("failovertest: %s: %w", m.Name(), err)
	}
	return queryOwning(ctx, conn, m.Name(), sql, args)
}
