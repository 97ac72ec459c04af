package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testCtx bounds each test generously; conditions are polled, never slept on.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// connect opens a TCP connection with the password, as an application would.
func connect(t *testing.T, ctx context.Context, connString string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func mustExec(t *testing.T, ctx context.Context, n *Node, sql string) {
	t.Helper()
	if err := n.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, ctx context.Context, n *Node, table string) int {
	t.Helper()
	var c int
	if err := n.queryRow(ctx, "SELECT count(*) FROM "+table, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func inRecovery(t *testing.T, ctx context.Context, n *Node) bool {
	t.Helper()
	r, err := n.InRecovery(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPrimaryAndReplicas(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	start := time.Now()
	c := Start(t, Options{Replicas: 2})
	t.Logf("primary + 2 replicas ready in %v", time.Since(start).Round(time.Millisecond))

	nodes := c.Nodes()
	if len(nodes) != 3 || c.Primary() != nodes[0] {
		t.Fatalf("nodes = %v, primary = %v", nodes, c.Primary())
	}
	for i, n := range nodes {
		if want := fmt.Sprintf("node%d", i); n.Name() != want {
			t.Errorf("node %d named %q, want %q", i, n.Name(), want)
		}
		if got := inRecovery(t, ctx, n); got != (i > 0) {
			t.Errorf("%s: pg_is_in_recovery = %v", n.Name(), got)
		}
	}

	// Write through a TCP connection with the password, read on replicas.
	p := connect(t, ctx, c.Primary().ConnString("application_name=pgtest"))
	if _, err := p.Exec(ctx, "CREATE TABLE t (id int); INSERT INTO t SELECT generate_series(1, 10)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range nodes[1:] {
		if got := count(t, ctx, r, "t"); got != 10 {
			t.Errorf("%s: %d rows, want 10", r.Name(), got)
		}
		rc := connect(t, ctx, r.ConnString(""))
		_, err := rc.Exec(ctx, "INSERT INTO t VALUES (11)")
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
			t.Errorf("%s: write on a standby: %v, want SQLSTATE 25006", r.Name(), err)
		}
	}

	// The multi-host string reaches the primary when asked for read-write.
	mc := connect(t, ctx, c.ConnString("target_session_attrs=read-write"))
	if got := mc.PgConn().Conn().RemoteAddr().String(); got != c.Primary().Addr() {
		t.Errorf("read-write connection went to %s, want %s", got, c.Primary().Addr())
	}
	if !strings.Contains(c.ConnString(""), nodes[2].Addr()) {
		t.Errorf("ConnString misses %s: %s", nodes[2].Addr(), c.ConnString(""))
	}
}

func TestPassword(t *testing.T) {
	t.Parallel()
	// The first is sent as a SCRAM verifier, the second (not ASCII) as is.
	for _, pw := range []string{`s3cret-'quote\back`, `pässwörd-'\x`} {
		t.Run(map[bool]string{true: "ascii", false: "non-ascii"}[isPrintableASCII(pw)], func(t *testing.T) {
			t.Parallel()
			testPassword(t, pw)
		})
	}
}

func testPassword(t *testing.T, pw string) {
	ctx := testCtx(t)
	c := Start(t, Options{Password: pw})
	if c.Password() != pw {
		t.Fatalf("Password() = %q", c.Password())
	}
	conn := connect(t, ctx, c.Primary().ConnString(""))
	if err := conn.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	const wrong = "not-the-password"
	cfg, err := pgx.ParseConfig(c.Primary().ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Password = wrong
	_, err = pgx.ConnectConfig(ctx, cfg)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
		t.Fatalf("wrong password: %v, want SQLSTATE 28P01", err)
	}
	if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), pw) {
		t.Errorf("error shows a password: %v", err)
	}
	if strings.Contains(c.Primary().LogTail(1<<20), pw) {
		t.Errorf("server log shows the password")
	}
}

func TestQuoting(t *testing.T) {
	for in, want := range map[string]string{
		`plain`: `'plain'`,
		`it's`:  `'it''s'`,
		`a\b'c`: `E'a\\b''c'`,
	} {
		if got := sqlLiteral(in); got != want {
			t.Errorf("sqlLiteral(%q) = %s, want %s", in, got, want)
		}
	}
	if got, want := confValue(`a\b'c`), `'a\\b''c'`; got != want {
		t.Errorf("confValue = %s, want %s", got, want)
	}
}

func TestFailover(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testCtx(t)
	c := Start(t, Options{Replicas: 2})
	n := c.Nodes()
	mustExec(t, ctx, n[0], "CREATE TABLE t (id int); INSERT INTO t VALUES (1)")
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if err := c.Failover(ctx, n[1]); err != nil {
		t.Fatal(err)
	}
	t.Logf("failover (stop, promote, repoint one replica) in %v", time.Since(start).Round(time.Millisecond))

	if c.Primary() != n[1] || n[0].Running() {
		t.Fatalf("primary = %v, old primary running = %v", c.Primary(), n[0].Running())
	}
	if inRecovery(t, ctx, n[1]) {
		t.Fatal("promoted node still in recovery")
	}
	conn := connect(t, ctx, n[1].ConnString(""))
	if _, err := conn.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(t, ctx, n[2], "t"); got != 2 {
		t.Errorf("node2 has %d rows, want 2", got)
	}
	// The multi-host string skips the dead node.
	mc := connect(t, ctx, c.ConnString("target_session_attrs=read-write"))
	if got := mc.PgConn().Conn().RemoteAddr().String(); got != n[1].Addr() {
		t.Errorf("read-write connection went to %s, want %s", got, n[1].Addr())
	}

	// The old primary comes back as a standby of the new one.
	start = time.Now()
	if err := c.Rejoin(ctx, n[0], n[1]); err != nil {
		t.Fatal(err)
	}
	t.Logf("rejoin after failover in %v (rewinds: %d)", time.Since(start).Round(time.Millisecond), n[0].Rewinds())
	mustExec(t, ctx, n[1], "INSERT INTO t VALUES (3)")
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(t, ctx, n[0], "t"); got != 3 {
		t.Errorf("rejoined node0 has %d rows, want 3", got)
	}
}

// waitCount polls until table on n has want rows.
func waitCount(t *testing.T, ctx context.Context, n *Node, table string, want int) {
	t.Helper()
	err := n.poll(ctx, "waiting for rows", func(ctx context.Context, conn *pgx.Conn) (bool, error) {
		var k int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&k)
		return k == want, err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFailoverDiverged fails over to a replica that missed the last write:
// the other replica and the old primary hold WAL the new primary never had,
// so they are rewound to follow it.
func TestFailoverDiverged(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	failoverDiverged(t, Start(t, Options{Replicas: 2}))
}

// failoverDiverged runs TestFailoverDiverged's drill on c, a primary with
// two replicas.
func failoverDiverged(t *testing.T, c *Cluster) {
	t.Helper()
	ctx := testCtx(t)
	n := c.Nodes()
	mustExec(t, ctx, n[0], "CREATE TABLE t (id int); INSERT INTO t VALUES (1)")
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	// Cut node1 off, then write what only node0 and node2 get.
	mustExec(t, ctx, n[1], "ALTER SYSTEM SET primary_conninfo = ''")
	mustExec(t, ctx, n[1], "SELECT pg_reload_conf()")
	err := n[1].poll(ctx, "waiting for the receiver to stop", func(ctx context.Context, conn *pgx.Conn) (bool, error) {
		var k int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_wal_receiver").Scan(&k)
		return k == 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, ctx, n[0], "INSERT INTO t SELECT generate_series(100, 199); CHECKPOINT")
	waitCount(t, ctx, n[2], "t", 101)

	start := time.Now()
	if err := c.Failover(ctx, n[1]); err != nil {
		t.Fatal(err)
	}
	t.Logf("failover with a rewind of node2 in %v", time.Since(start).Round(time.Millisecond))
	if n[2].Rewinds() != 1 {
		t.Errorf("node2 rewound %d times, want 1", n[2].Rewinds())
	}
	if got := count(t, ctx, n[2], "t"); got != 1 {
		t.Errorf("rewound node2 has %d rows, want 1 (the new primary's history)", got)
	}
	mustExec(t, ctx, n[1], "INSERT INTO t VALUES (2)")
	if err := c.Rejoin(ctx, n[0], n[1]); err != nil {
		t.Fatal(err)
	}
	if n[0].Rewinds() != 1 {
		t.Errorf("node0 rewound %d times, want 1", n[0].Rewinds())
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Node{n[0], n[2]} {
		if !inRecovery(t, ctx, r) {
			t.Errorf("%s is not a standby", r.Name())
		}
		if got := count(t, ctx, r, "t"); got != 2 {
			t.Errorf("%s has %d rows, want 2", r.Name(), got)
		}
	}
}

func TestSwitchoverRoundTrip(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testCtx(t)
	c := Start(t, Options{Replicas: 2, Zones: []string{"z0", "z1", "z2"}})
	n := c.Nodes()
	mustExec(t, ctx, n[0], "CREATE TABLE t (id int)")

	rows := 0
	for i, to := range []*Node{n[1], n[0]} {
		old := c.Primary()
		start := time.Now()
		if err := c.Switchover(ctx, to); err != nil {
			t.Fatal(err)
		}
		t.Logf("switchover %d (%s -> %s) in %v", i+1, old.Name(), to.Name(), time.Since(start).Round(time.Millisecond))
		if c.Primary() != to || !old.Running() {
			t.Fatalf("primary = %v, old running = %v", c.Primary(), old.Running())
		}
		if inRecovery(t, ctx, to) {
			t.Fatalf("%s still in recovery", to.Name())
		}
		for _, node := range n {
			if node.Rewinds() != 0 {
				t.Errorf("%s was rewound during a switchover", node.Name())
			}
		}
		if !inRecovery(t, ctx, old) {
			t.Fatalf("old primary %s is not a standby", old.Name())
		}
		conn := connect(t, ctx, to.ConnString(""))
		if _, err := conn.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		rows++
		if err := c.WaitReplicated(ctx); err != nil {
			t.Fatal(err)
		}
		for _, r := range c.Replicas() {
			if got := count(t, ctx, r, "t"); got != rows {
				t.Errorf("%s has %d rows, want %d", r.Name(), got, rows)
			}
		}
	}
	// Each node keeps its own zone through rejoins.
	for i, node := range n {
		var zone string
		if err := node.queryRow(ctx, "SELECT current_setting('pgfailover.zone', true)", &zone); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("z%d", i); zone != want || node.Zone() != want {
			t.Errorf("%s: zone %q (Zone() %q), want %q", node.Name(), zone, node.Zone(), want)
		}
	}
}

func TestCrashAndRestart(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testCtx(t)
	c := Start(t, Options{Replicas: 1})
	p, r := c.Nodes()[0], c.Nodes()[1]
	mustExec(t, ctx, p, "CREATE TABLE t (id int); INSERT INTO t VALUES (1)")

	// An idle session sees the postmaster die.
	idle := connect(t, ctx, p.ConnString(""))
	pid := p.pid()
	if err := p.Stop(ctx, Crash); err != nil {
		t.Fatal(err)
	}
	if p.Running() || groupAlive(pid) || len(serverPIDs(p.DataDir())) > 0 {
		t.Fatal("server processes left after Stop(Crash)")
	}
	if _, err := os.Stat(p.DataDir() + "/postmaster.pid"); !os.IsNotExist(err) {
		t.Errorf("postmaster.pid left behind: %v", err)
	}
	if _, err := idle.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("query on a crashed server succeeded")
	}

	start := time.Now()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart after crash in %v", time.Since(start).Round(time.Millisecond))
	if err := p.Start(ctx); !errors.Is(err, ErrRunning) {
		t.Errorf("second Start: %v, want ErrRunning", err)
	}
	mustExec(t, ctx, p, "INSERT INTO t VALUES (2)")
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(t, ctx, r, "t"); got != 2 {
		t.Errorf("replica has %d rows, want 2", got)
	}

	// A standby crashes and comes back streaming.
	for _, mode := range []StopMode{Crash, Immediate, Fast} {
		if err := r.Stop(ctx, mode); err != nil {
			t.Fatal(err)
		}
		if err := r.Stop(ctx, mode); err != nil {
			t.Fatalf("second Stop(%v): %v", mode, err)
		}
		mustExec(t, ctx, p, "INSERT INTO t VALUES (3)")
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.waitStreaming(ctx, r, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(t, ctx, r, "t"); got != 5 {
		t.Errorf("replica has %d rows, want 5", got)
	}
}

func TestPauseReplay(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testCtx(t)
	c := Start(t, Options{Replicas: 1})
	p, r := c.Nodes()[0], c.Nodes()[1]
	mustExec(t, ctx, p, "CREATE TABLE t (id int)")
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(t, ctx, p, "INSERT INTO t VALUES (1)")
	var lsn string
	if err := p.queryRow(ctx, "SELECT pg_current_wal_lsn()::text", &lsn); err != nil {
		t.Fatal(err)
	}
	// Wait until the standby has received the insert; it must not show it.
	err := r.poll(ctx, "waiting for WAL to arrive", func(ctx context.Context, conn *pgx.Conn) (bool, error) {
		var ok bool
		err := conn.QueryRow(ctx, "SELECT pg_last_wal_receive_lsn() >= $1::text::pg_lsn", lsn).Scan(&ok)
		return ok, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, ctx, r, "t"); got != 0 {
		t.Fatalf("paused standby shows %d rows", got)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = c.WaitReplicated(short)
	cancel()
	// The deadline may end a connect as well as the wait itself; pgconn
	// then reports a timeout that does not always wrap the context's error.
	if !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err) {
		t.Fatalf("WaitReplicated with replay paused: %v, want a deadline error", err)
	}
	if err := r.ResumeReplay(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(t, ctx, r, "t"); got != 1 {
		t.Fatalf("standby shows %d rows after resume, want 1", got)
	}
}

func TestSyncReplicationAndSettings(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testCtx(t)
	c := Start(t, Options{
		Replicas:        1,
		SyncReplication: true,
		Settings:        map[string]string{"work_mem": "7MB", "application_name": "it's"},
		Zones:           []string{"eu-1a"},
	})
	p, r := c.Nodes()[0], c.Nodes()[1]
	var state, names string
	if err := p.queryRow(ctx, "SELECT sync_state FROM pg_stat_replication", &state); err != nil {
		t.Fatal(err)
	}
	if err := p.queryRow(ctx, "SHOW synchronous_standby_names", &names); err != nil {
		t.Fatal(err)
	}
	if state != "quorum" || names != "ANY 1 (node1)" {
		t.Errorf("sync_state %q, synchronous_standby_names %q", state, names)
	}
	mustExec(t, ctx, p, "CREATE TABLE t (id int); INSERT INTO t VALUES (1)")
	// A synchronous commit is visible on the standby once replayed.
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	var workMem string
	var zone *string
	if err := r.queryRow(ctx, "SELECT current_setting('work_mem'), current_setting('pgfailover.zone', true)", &workMem, &zone); err != nil {
		t.Fatal(err)
	}
	if workMem != "7MB" || zone != nil {
		t.Errorf("replica: work_mem %q, zone %v; want 7MB and no zone", workMem, zone)
	}
	if err := p.queryRow(ctx, "SELECT current_setting('pgfailover.zone', true)", &zone); err != nil {
		t.Fatal(err)
	}
	if zone == nil || *zone != "eu-1a" {
		t.Errorf("primary zone %v, want eu-1a", zone)
	}
}

func TestCloseLeavesNothing(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testCtx(t)
	c, err := New(ctx, Options{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, n := range c.Nodes() {
		pids = append(pids, serverPIDs(n.DataDir())...)
	}
	if len(pids) < 2*len(c.Nodes()) {
		t.Fatalf("found only %d server processes", len(pids))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil && !isZombie(pid) {
			t.Errorf("server process %d still alive", pid)
		}
	}
	if _, err := os.Stat(c.base); !os.IsNotExist(err) {
		t.Errorf("cluster directory left: %v", err)
	}
	for _, n := range c.Nodes() {
		if n.Running() {
			t.Errorf("%s still running", n.Name())
		}
		if err := syscall.Kill(-n.pid(), 0); err == nil {
			t.Errorf("%s: process group still exists", n.Name())
		}
	}
}

func TestOptionErrors(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	for _, o := range []Options{
		{Replicas: -1},
		{SyncReplication: true},
		{Zones: []string{"a", "b"}},
		{Settings: map[string]string{"bad name": "x"}},
		{Settings: map[string]string{"Port": "5432"}},
		{Settings: map[string]string{"work_mem": "1MB\nfsync = on"}},
	} {
		if c, err := New(ctx, o); err == nil {
			_ = c.Close()
			t.Errorf("New(%+v) succeeded", o)
		}
	}
	_, err := New(ctx, Options{BinDir: t.TempDir()})
	if !errors.Is(err, ErrNoBinaries) {
		t.Errorf("New with an empty BinDir: %v, want ErrNoBinaries", err)
	}
}

// TestFailoverWithPausedReplica fails over while the other replica has its
// replay paused: it follows the new primary once replay resumes.
func TestFailoverWithPausedReplica(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testCtx(t)
	c := Start(t, Options{Replicas: 2})
	n := c.Nodes()
	mustExec(t, ctx, n[0], "CREATE TABLE t (id int); INSERT INTO t VALUES (1)")
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n[2].PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(t, ctx, n[0], "INSERT INTO t VALUES (2)")
	waitCount(t, ctx, n[1], "t", 2)
	if err := c.Failover(ctx, n[1]); err != nil {
		t.Fatal(err)
	}
	mustExec(t, ctx, n[1], "INSERT INTO t VALUES (3)")
	if got := count(t, ctx, n[2], "t"); got != 1 {
		t.Errorf("paused node2 shows %d rows, want 1", got)
	}
	if err := n[2].ResumeReplay(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(t, ctx, n[2], "t"); got != 3 {
		t.Errorf("node2 shows %d rows after resume, want 3", got)
	}
}

// isZombie reports whether pid has exited but not been reaped (by PID 1,
// for orphaned server children).
func isZombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // gone
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// TestNewCancelled runs alone (not parallel): a New whose context ends
// midway must not leave servers or directories behind.
func TestNewCancelled(t *testing.T) {
	skipUnderShort(t)
	warm, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bins, err := cachedBinaries(warm, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := templateFor(warm, bins); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{50 * time.Millisecond, 400 * time.Millisecond, 700 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		c, err := New(ctx, Options{Replicas: 2})
		cancel()
		if err == nil {
			_ = c.Close()
			t.Logf("New finished within %v", d)
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("New with %v: %v, want a deadline error", d, err)
		}
		if dirs, pids := ourLeftovers(t); len(dirs) > 0 || len(pids) > 0 {
			t.Fatalf("after a cancelled New: directories %v, processes %v", dirs, pids)
		}
	}
}
