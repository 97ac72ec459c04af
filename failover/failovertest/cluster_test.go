package failovertest_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// TestStartDefaults: with no option, a primary and one streaming replica,
// and a connection string on which failover.New writes to the primary.
func TestStartDefaults(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t)
	nodes := c.Nodes()
	if len(nodes) != 2 {
		t.Fatalf("%d nodes, want 2", len(nodes))
	}
	if c.Primary() != nodes[0] {
		t.Errorf("primary %v, want %v", c.Primary(), nodes[0])
	}
	if rs := c.Replicas(); len(rs) != 1 || rs[0] != nodes[1] {
		t.Errorf("replicas %v, want [%v]", rs, nodes[1])
	}
	if inRecovery(t, ctx, nodes[0]) || !inRecovery(t, ctx, nodes[1]) {
		t.Error("node0 should be the primary and node1 a standby")
	}
	if got := scalar[string](t, ctx, nodes[1], "SELECT status FROM pg_stat_wal_receiver"); got != "streaming" {
		t.Errorf("replica's WAL receiver is %q, want streaming", got)
	}
	for _, n := range nodes {
		if !strings.Contains(c.ConnString(""), n.Addr()) {
			t.Errorf("ConnString %q does not name %s", c.ConnString(""), n.Addr())
		}
	}
	pool := newPool(t, ctx, c.ConnString("pool_max_conns=2"))
	if _, err := pool.Exec(ctx, "CREATE TABLE t (id int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if got := nodeOf(t, ctx, pool); got != "node0" {
		t.Errorf("the Pool writes to %s, want node0", got)
	}
	if strings.Contains(c.ConnString(""), "sslmode=require") {
		t.Error("ConnString asks for TLS without the TLS option")
	}
	// Each server's log is there to read, its end first.
	for _, n := range nodes {
		log := n.LogTail(64 << 10)
		if !strings.Contains(log, "database system is ready to accept") {
			t.Errorf("%s: its log does not say it was ready:\n%s", n, log)
		}
		// The server may log more meanwhile: the short tail is read first.
		if tail := n.LogTail(40); len(tail) > 40 || !strings.Contains(n.LogTail(64<<10), tail) {
			t.Errorf("%s: LogTail(40) = %q, not from the end of the log", n, tail)
		}
		if tail := n.LogTail(0); tail != "" {
			t.Errorf("%s: LogTail(0) = %q, want nothing", n, tail)
		}
	}
}

// TestOptions: every option reaches the servers.
func TestOptions(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	const pw = "another secret"
	c := failovertest.Start(t,
		failovertest.Replicas(2),
		failovertest.SyncReplication(),
		failovertest.Zones("east", "west"),
		failovertest.Setting("work_mem", "5MB"),
		failovertest.Setting("lock_timeout", "7s"),
		failovertest.Password(pw),
		failovertest.TLS(),
	)
	nodes := c.Nodes()
	if len(nodes) != 3 || len(c.Replicas()) != 2 {
		t.Fatalf("%d nodes, %d replicas; want 3 and 2", len(nodes), len(c.Replicas()))
	}
	for i, want := range []string{"east", "west", ""} {
		if got := nodes[i].Zone(); got != want {
			t.Errorf("%s: Zone() = %q, want %q", nodes[i], got, want)
		}
		if want == "" {
			continue
		}
		if got := scalar[string](t, ctx, nodes[i], "SELECT current_setting('pgfailover.zone')"); got != want {
			t.Errorf("%s: pgfailover.zone = %q, want %q", nodes[i], got, want)
		}
	}
	for _, n := range nodes {
		if got := scalar[string](t, ctx, n, "SHOW work_mem"); got != "5MB" {
			t.Errorf("%s: work_mem = %q, want 5MB", n, got)
		}
		if got := scalar[string](t, ctx, n, "SHOW lock_timeout"); got != "7s" {
			t.Errorf("%s: lock_timeout = %q, want 7s", n, got)
		}
		// The primary's synchronous standbys are the standbys that follow
		// it; a standby's list is empty.
		want := ""
		if n == c.Primary() {
			want = "ANY 1 (node1, node2)"
		}
		if got := scalar[string](t, ctx, n, "SHOW synchronous_standby_names"); got != want {
			t.Errorf("%s: synchronous_standby_names = %q, want %q", n, got, want)
		}
	}
	if got := scalar[int64](t, ctx, c.Primary(),
		"SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')"); got == 0 {
		t.Error("the primary has no synchronous standby")
	}
	if c.Password() != pw || !strings.Contains(c.ConnString(""), "another%20secret") {
		t.Errorf("the password is not in the connection string: %q", c.ConnString(""))
	}
	if c.RootCAs() == nil {
		t.Error("RootCAs() = nil with TLS")
	}

	// The connection string, as is, connects over TLS with the password.
	conn, err := pgx.Connect(ctx, c.ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var ssl bool
	if err := conn.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil {
		t.Fatal(err)
	}
	if !ssl {
		t.Error("ConnString's connection does not use TLS")
	}
	bad := strings.Replace(c.ConnString(""), "another%20secret", "wrong", 1)
	if conn, err := pgx.Connect(ctx, bad); err == nil {
		conn.Close(ctx)
		t.Error("connected with a wrong password")
	}
}

// TestOptionErrors: a bad option fails New with an error naming it, and
// leaves nothing running.
func TestOptionErrors(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	for _, tc := range []struct {
		opts []failovertest.Option
		want string
	}{
		{[]failovertest.Option{failovertest.Replicas(-1)}, "Replicas = -1"},
		{[]failovertest.Option{failovertest.Replicas(0), failovertest.SyncReplication()}, "SyncReplication needs at least one replica"},
		{[]failovertest.Option{failovertest.Zones("a", "b", "c")}, "3 zones for 2 nodes"},
		{[]failovertest.Option{failovertest.Setting("port", "1")}, "setting port is managed"},
	} {
		c, err := failovertest.New(ctx, tc.opts...)
		if err == nil {
			c.Close()
			t.Errorf("New accepted options meant to fail with %q", tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %q does not say %q", err, tc.want)
		}
	}
}

// TestNewWithoutBinaries: where the server programs are missing, the error
// wraps ErrNoBinaries and names the command that installs them.
func TestNewWithoutBinaries(t *testing.T) {
	empty := t.TempDir()
	t.Setenv(failovertest.BinDirEnv, empty)
	c, err := failovertest.New(testContext(t))
	if err == nil {
		c.Close()
		t.Fatal("New succeeded without server programs")
	}
	if !errors.Is(err, failovertest.ErrNoBinaries) {
		t.Errorf("error does not wrap ErrNoBinaries: %v", err)
	}
	for _, want := range []string{empty, "install with: "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
}

// TestFailover: the primary crashes, a replica is promoted after the gap,
// the Pool writes to it, and the old primary rejoins as a standby.
func TestFailover(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2), failovertest.SyncReplication())
	pool := newPool(t, ctx, c.ConnString("pool_max_conns=2"))
	if _, err := pool.Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
		t.Fatal(err)
	}
	old := c.Primary()

	// A write started during the gap waits for the new primary.
	var during atomic.Value
	started := make(chan struct{})
	go func() {
		<-started
		_, err := pool.Exec(ctx, "INSERT INTO t VALUES (1)")
		during.Store(errBox{err})
	}()
	done := make(chan struct{})
	var promoted *failovertest.Node
	var ferr error
	go func() {
		defer close(done)
		promoted, ferr = c.Failover(ctx, 500*time.Millisecond)
	}()
	waitUntil(t, 30*time.Second, "the primary to go down", func() bool { return !old.Running() })
	close(started)
	<-done
	if ferr != nil {
		t.Fatal(ferr)
	}
	if promoted == old || c.Primary() != promoted {
		t.Fatalf("Failover returned %v, Primary() %v, old %v", promoted, c.Primary(), old)
	}
	if inRecovery(t, ctx, promoted) {
		t.Errorf("%v is still in recovery", promoted)
	}
	if old.Running() {
		t.Errorf("the old primary %v runs", old)
	}
	waitUntil(t, 60*time.Second, "the write made during the gap", func() bool { return during.Load() != nil })
	if err := during.Load().(errBox).err; err != nil {
		t.Errorf("a write sent while no primary existed: %v", err)
	}
	if got := nodeOf(t, ctx, pool); got != promoted.Name() {
		t.Errorf("the Pool writes to %s, want %s", got, promoted.Name())
	}
	// The other replica follows the new primary.
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Replicas() {
		if r == old {
			continue
		}
		if got := scalar[int64](t, ctx, r, "SELECT count(*) FROM t"); got != 1 {
			t.Errorf("%v has %d rows, want 1", r, got)
		}
	}

	if err := c.Rejoin(ctx, old); err != nil {
		t.Fatal(err)
	}
	if !old.Running() || !inRecovery(t, ctx, old) {
		t.Errorf("after Rejoin %v runs %v and is a standby %v", old, old.Running(), inRecovery(t, ctx, old))
	}
	if _, err := pool.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if got := scalar[int64](t, ctx, old, "SELECT count(*) FROM t"); got != 2 {
		t.Errorf("the rejoined %v has %d rows, want 2", old, got)
	}
}

type errBox struct{ err error }

// TestCrashPrimaryThenPromote: CrashPrimary leaves the cluster without a
// primary; Promote of a chosen standby makes it primary and the other
// standby follows.
func TestCrashPrimaryThenPromote(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	nodes := c.Nodes()
	crashed, err := c.CrashPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if crashed != nodes[0] || crashed.Running() {
		t.Fatalf("CrashPrimary returned %v (running %v), want node0 down", crashed, crashed.Running())
	}
	if c.Primary() != nodes[0] {
		t.Errorf("Primary() = %v before any promotion, want the crashed node0", c.Primary())
	}
	// The standbys are still standbys: nothing was promoted.
	for _, r := range nodes[1:] {
		if !inRecovery(t, ctx, r) {
			t.Errorf("%v left recovery without a promotion", r)
		}
	}
	if err := c.Promote(ctx, nodes[2]); err != nil {
		t.Fatal(err)
	}
	if c.Primary() != nodes[2] || inRecovery(t, ctx, nodes[2]) {
		t.Fatalf("after Promote(node2): Primary() = %v", c.Primary())
	}
	checkFollows(t, ctx, c, nodes[2], nodes[1])
}

// checkFollows checks that standby replays what primary writes.
func checkFollows(t *testing.T, ctx context.Context, c *failovertest.Cluster, primary, standby *failovertest.Node) {
	t.Helper()
	if err := primary.Exec(ctx, "CREATE TABLE t (id int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if got := scalar[int64](t, ctx, standby, "SELECT count(*) FROM t"); got != 1 {
		t.Errorf("%v has %d rows of the new primary's, want 1", standby, got)
	}
}

// TestPromoteWhilePrimaryRuns: Promote with the old primary still up
// gives two primaries, as its doc says, and the other standby follows the
// new one.
func TestPromoteWhilePrimaryRuns(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	nodes := c.Nodes()
	if err := c.Promote(ctx, nodes[1]); err != nil {
		t.Fatal(err)
	}
	if c.Primary() != nodes[1] {
		t.Fatalf("after Promote(node1): Primary() = %v", c.Primary())
	}
	for _, n := range nodes[:2] {
		if inRecovery(t, ctx, n) {
			t.Errorf("%v is in recovery, want it a primary", n)
		}
	}
	checkFollows(t, ctx, c, nodes[1], nodes[2])
}

// TestSwitchover: the primary role moves cleanly and the old primary comes
// back as a standby of the new one.
func TestSwitchover(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t)
	old := c.Primary()
	to, err := c.Switchover(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if to == old || c.Primary() != to {
		t.Fatalf("Switchover returned %v, Primary() %v, old %v", to, c.Primary(), old)
	}
	if inRecovery(t, ctx, to) || !old.Running() || !inRecovery(t, ctx, old) {
		t.Fatal("after the switchover the new primary must be out of recovery, the old one a running standby")
	}
	pool := newPool(t, ctx, c.ConnString(""))
	if _, err := pool.Exec(ctx, "CREATE TABLE t (id int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if got := nodeOf(t, ctx, pool); got != to.Name() {
		t.Errorf("the Pool writes to %s, want %s", got, to.Name())
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if got := scalar[int64](t, ctx, old, "SELECT count(*) FROM t"); got != 1 {
		t.Errorf("the old primary has %d rows of the new one's, want 1", got)
	}
}

// TestFreezeThaw: a frozen primary answers nothing, not even a new
// connection; thawed, it answers again.
func TestFreezeThaw(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	p := c.Primary()
	conn, err := pgx.Connect(ctx, p.ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := p.Freeze(); err != nil {
		t.Fatal(err)
	}
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = conn.Exec(qctx, "SELECT 1")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a query on a frozen server ended with %v, want the caller's deadline", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	other, err := pgx.Connect(cctx, p.ConnString(""))
	cancel()
	if err == nil {
		other.Close(ctx)
		t.Error("connected to a frozen server")
	}
	if err := p.Thaw(); err != nil {
		t.Fatal(err)
	}
	if got := scalar[int64](t, ctx, p, "SELECT 1"); got != 1 {
		t.Errorf("SELECT 1 = %d after Thaw", got)
	}
	// Left frozen, it is still stopped by the test's cleanup.
	if err := p.Freeze(); err != nil {
		t.Fatal(err)
	}
}

// TestPauseReplay: a paused standby receives WAL but does not apply it
// until ResumeReplay.
func TestPauseReplay(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t)
	p, r := c.Primary(), c.Replicas()[0]
	pool := newPool(t, ctx, c.ConnString(""))
	if _, err := pool.Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	target := scalar[string](t, ctx, p, "SELECT pg_current_wal_lsn()::text")
	// Received up to the insert's WAL, replayed short of it.
	waitUntil(t, 30*time.Second, "the standby to receive the insert", func() bool {
		return scalar[bool](t, ctx, r, "SELECT pg_last_wal_receive_lsn() >= '"+target+"'::pg_lsn")
	})
	if scalar[bool](t, ctx, r, "SELECT pg_last_wal_replay_lsn() >= '"+target+"'::pg_lsn") {
		t.Fatal("a paused standby replayed the insert")
	}
	if got := scalar[int64](t, ctx, r, "SELECT count(*) FROM t"); got != 0 {
		t.Errorf("paused standby shows %d rows, want 0", got)
	}
	if err := r.ResumeReplay(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if got := scalar[int64](t, ctx, r, "SELECT count(*) FROM t"); got != 1 {
		t.Errorf("resumed standby shows %d rows, want 1", got)
	}
}

// TestRestartAndCrash: Restart ends open sessions with 57P01 and brings the
// server back in its role; a crashed standby restarts and streams again.
func TestRestartAndCrash(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t)
	p, r := c.Primary(), c.Replicas()[0]
	conn, err := pgx.Connect(ctx, p.ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	wantAdminShutdown(t, ctx, conn, "Restart")
	if !p.Running() || inRecovery(t, ctx, p) || c.Primary() != p {
		t.Error("the restarted primary is not a running primary")
	}

	if err := r.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Running() {
		t.Fatal("the crashed standby runs")
	}
	if err := r.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitStreaming(t, ctx, r, "the restarted standby")
}

// TestStopStart: Stop shuts a server down cleanly (open sessions get
// 57P01) and leaves it down; Start brings it back in its role. Port,
// Connect and ConnStringFor reach the node they name.
func TestStopStart(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t)
	p, r := c.Primary(), c.Replicas()[0]

	// ConnStringFor names the nodes given, in their order, and no other.
	if both := c.ConnStringFor([]*failovertest.Node{r, p}, ""); !strings.Contains(both, r.Addr()) || strings.Index(both, r.Addr()) > strings.Index(both, p.Addr()) {
		t.Errorf("ConnStringFor(replica, primary) = %q, want the replica first", both)
	}
	dsn := c.ConnStringFor([]*failovertest.Node{r}, "")
	if !strings.Contains(dsn, r.Addr()) || strings.Contains(dsn, p.Addr()) {
		t.Fatalf("ConnStringFor(replica) = %q", dsn)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if got := nodeOf(t, ctx, conn); got != r.Name() {
		t.Errorf("ConnStringFor(replica) reached %s", got)
	}
	var port int
	if err := conn.QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port); err != nil {
		t.Fatal(err)
	}
	if r.Port() != port || p.Port() == port {
		t.Errorf("Port(): replica %d, primary %d; the replica's server says %d", r.Port(), p.Port(), port)
	}
	own, err := r.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := nodeOf(t, ctx, own); got != r.Name() {
		t.Errorf("Connect reached %s, want %s", got, r.Name())
	}
	own.Close(ctx)

	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	wantAdminShutdown(t, ctx, conn, "Stop")
	if r.Running() {
		t.Fatal("the stopped standby runs")
	}
	if err := r.Stop(ctx); err != nil {
		t.Errorf("stopping a stopped node: %v", err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !r.Running() || !inRecovery(t, ctx, r) {
		t.Error("the started standby is not a running standby")
	}
	if err := r.Start(ctx); err == nil {
		t.Error("starting a running node succeeded")
	}
	waitStreaming(t, ctx, r, "the started standby")

	// The primary: down until Start, still the primary after it.
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Running() || c.Primary() != p {
		t.Fatalf("after Stop: running %v, Primary() %v", p.Running(), c.Primary())
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if inRecovery(t, ctx, p) {
		t.Error("the restarted primary is in recovery")
	}
}

// TestNotANode: faults refuse a node of another cluster.
func TestNotANode(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	a := failovertest.Start(t, failovertest.Replicas(0))
	b := failovertest.Start(t, failovertest.Replicas(0))
	if err := a.Promote(ctx, b.Primary()); err == nil || !strings.Contains(err.Error(), "not a node of this cluster") {
		t.Errorf("Promote of another cluster's node: %v", err)
	}
	if err := a.Promote(ctx, nil); err == nil {
		t.Error("Promote(nil) succeeded")
	}
}

// wantAdminShutdown checks that conn, a session open across what (a
// clean shutdown of its server), was ended with SQLSTATE 57P01.
func wantAdminShutdown(t *testing.T, ctx context.Context, conn *pgx.Conn, what string) {
	t.Helper()
	_, err := conn.Exec(ctx, "SELECT 1")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57P01" {
		t.Errorf("a session open across %s got %v, want SQLSTATE 57P01", what, err)
	}
}

// waitStreaming waits until the standby r streams from its primary.
func waitStreaming(t *testing.T, ctx context.Context, r *failovertest.Node, what string) {
	t.Helper()
	waitUntil(t, 30*time.Second, what+" to stream", func() bool {
		return scalar[int64](t, ctx, r, "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'") == 1
	})
}
