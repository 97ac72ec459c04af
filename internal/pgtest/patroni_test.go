package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// patroniCount returns count(*) of table on member m over TCP with the
// password, as an application would read it.
func patroniCount(t *testing.T, ctx context.Context, m *PatroniMember, table string) int {
	t.Helper()
	conn := connect(t, ctx, m.ConnString("connect_timeout=5"))
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("%s: count %s: %v", m.Name(), table, err)
	}
	return n
}

// waitPatroniCount polls until every member shows want rows in table.
func waitPatroniCount(t *testing.T, ctx context.Context, pc *PatroniCluster, table string, want int) {
	t.Helper()
	for _, m := range pc.Members() {
		var got int
		for {
			err := m.QueryRow(ctx, "SELECT count(*) FROM "+table, &got)
			if err == nil && got == want {
				break
			}
			if err := Sleep(ctx, 20*time.Millisecond); err != nil {
				t.Fatalf("%s shows %d rows in %s, want %d: %v", m.Name(), got, table, want, err)
			}
		}
	}
}

// insertOnLeader inserts id through the multi-host URL, as an application
// that asks for a read-write server would.
func insertOnLeader(t *testing.T, ctx context.Context, pc *PatroniCluster, id int) {
	t.Helper()
	conn := connect(t, ctx, pc.ConnString("target_session_attrs=read-write&connect_timeout=5"))
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "INSERT INTO t VALUES ($1)", id); err != nil {
		t.Fatalf("insert %d: %v", id, err)
	}
}

func mustBeReplica(t *testing.T, ctx context.Context, m *PatroniMember) {
	t.Helper()
	r, err := m.InRecovery(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !r {
		t.Fatalf("%s is not in recovery, want a replica", m.Name())
	}
}

// TestPatroni runs one real Patroni cluster through the drills in turn. It
// is not parallel: Patroni's one-second HA loop is timed against the other
// tests' servers on a small machine otherwise.
func TestPatroni(t *testing.T) {
	skipUnderShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	pc := StartPatroni(t, PatroniOptions{Zones: []string{"eu-1a", "eu-1b"}})
	t.Logf("3 members healthy in %v", time.Since(start).Round(time.Millisecond))

	t.Run("Topology", func(t *testing.T) {
		ms := pc.Members()
		if len(ms) != 3 {
			t.Fatalf("%d members, want 3", len(ms))
		}
		urls := pc.APIURLs()
		cs := pc.ConnString("")
		for i, m := range ms {
			if want := fmt.Sprintf("member%d", i); m.Name() != want {
				t.Errorf("member %d named %q, want %q", i, m.Name(), want)
			}
			if urls[i] != m.APIURL() || !strings.HasPrefix(m.APIURL(), "http://127.0.0.1:") {
				t.Errorf("%s: API URL %q, APIURLs[%d] = %q", m.Name(), m.APIURL(), i, urls[i])
			}
			if !strings.Contains(cs, m.Addr()) || m.Addr() != fmt.Sprintf("127.0.0.1:%d", m.Port()) {
				t.Errorf("%s: Addr %q not in ConnString or not its port %d", m.Name(), m.Addr(), m.Port())
			}
		}
		var zone string
		if err := ms[1].QueryRow(ctx, "SELECT current_setting('pgfailover.zone', true)", &zone); err != nil || zone != "eu-1b" {
			t.Errorf("member1 zone = %q, %v; want eu-1b", zone, err)
		}
		// A wrong password really fails.
		bad := connURL("wrong", []string{ms[0].Addr()}, "connect_timeout=5")
		if conn, err := pgx.Connect(ctx, bad); err == nil {
			_ = conn.Close(context.Background())
			t.Error("connected with a wrong password")
		}

		conn := connect(t, ctx, pc.ConnString("target_session_attrs=read-write&connect_timeout=5"))
		if _, err := conn.Exec(ctx, "CREATE TABLE t (id int); INSERT INTO t VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		leader, err := pc.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := conn.PgConn().Conn().RemoteAddr().String(); got != leader.Addr() {
			t.Errorf("read-write connection went to %s, leader is %s", got, leader)
		}
		waitPatroniCount(t, ctx, pc, "t", 1)
	})

	t.Run("Switchover", func(t *testing.T) {
		leader, err := pc.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sync, err := pc.SyncStandby(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		from, to, err := pc.Switchover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("switchover %s -> %s returned after %v", from.Name(), to.Name(), time.Since(t0).Round(time.Millisecond))
		if from != leader || to != sync {
			t.Fatalf("switched over %s -> %s, want %s -> %s (the sync standby)", from, to, leader, sync)
		}
		nl, err := pc.WaitNewLeader(ctx, from)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("new leader %s writable after %v", nl.Name(), time.Since(t0).Round(time.Millisecond))
		if nl != to {
			t.Fatalf("new leader %s, want %s", nl, to)
		}
		if got := patroniCount(t, ctx, nl, "t"); got != 1 {
			t.Fatalf("new leader shows %d rows, want 1", got)
		}
		insertOnLeader(t, ctx, pc, 2)
		if err := pc.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("healthy again after %v", time.Since(t0).Round(time.Millisecond))
		mustBeReplica(t, ctx, from)
		waitPatroniCount(t, ctx, pc, "t", 2)
	})

	t.Run("KillLeaderPostmaster", func(t *testing.T) {
		t0 := time.Now()
		old, err := pc.KillLeaderPostmaster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		nl, err := pc.WaitNewLeader(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("postmaster of %s killed; %s primary after %v", old.Name(), nl.Name(), time.Since(t0).Round(time.Millisecond))
		insertOnLeader(t, ctx, pc, 3)
		if err := pc.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("healthy again after %v", time.Since(t0).Round(time.Millisecond))
		mustBeReplica(t, ctx, old)
		waitPatroniCount(t, ctx, pc, "t", 3)
	})

	t.Run("KillLeaderNode", func(t *testing.T) {
		t0 := time.Now()
		old, err := pc.KillLeaderNode(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if old.Running() {
			t.Fatalf("%s: Patroni still running", old.Name())
		}
		nl, err := pc.WaitNewLeader(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		// The lock outlives its holder by about the ttl; how long that took
		// is reported, not asserted: it depends on when the leader last
		// renewed it and on the machine's load.
		t.Logf("%s killed; %s primary after %v", old.Name(), nl.Name(), time.Since(t0).Round(time.Millisecond))
		if err := pc.WaitHealthy(ctx); err == nil {
			t.Fatal("WaitHealthy succeeded with a member down")
		}
		insertOnLeader(t, ctx, pc, 4)
		t1 := time.Now()
		if err := pc.RestartMember(ctx, old); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s restarted in %v", old.Name(), time.Since(t1).Round(time.Millisecond))
		if err := pc.RestartMember(ctx, old); !errors.Is(err, ErrRunning) {
			t.Errorf("second RestartMember: %v, want ErrRunning", err)
		}
		if err := pc.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("healthy again %v after the restart", time.Since(t1).Round(time.Millisecond))
		mustBeReplica(t, ctx, old)
		if l, err := pc.Leader(ctx); err != nil || l != nl {
			t.Errorf("leader %v (%v), want %s", l, err, nl)
		}
		waitPatroniCount(t, ctx, pc, "t", 4)
	})

	t.Run("Close", func(t *testing.T) {
		pids := pidsUnder(pc.base)
		if pc.etcd.proc != nil {
			pids = append(pids, pc.etcd.proc.pid)
		}
		if len(pids) < 3*3 {
			t.Fatalf("found only %d processes of the cluster: %v", len(pids), pids)
		}
		t0 := time.Now()
		if err := pc.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("closed in %v", time.Since(t0).Round(time.Millisecond))
		if err := pc.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, 0); err == nil && !isZombie(pid) {
				t.Errorf("process %d still alive", pid)
			}
		}
		if _, err := os.Stat(pc.base); !os.IsNotExist(err) {
			t.Errorf("cluster directory left: %v", err)
		}
		if d := pc.etcd.memData; d != "" {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Errorf("etcd's data left in %s: %v", d, err)
			}
		}
		for _, m := range pc.Members() {
			if m.Running() {
				t.Errorf("%s: Patroni still running", m.Name())
			}
		}
	})
}

// TestPatroniOptionErrors checks that bad options are refused before
// anything starts.
func TestPatroniOptionErrors(t *testing.T) {
	ctx := testCtx(t)
	for _, o := range []PatroniOptions{
		{Members: -1},
		{Members: 1},
		{TTL: 1500 * time.Millisecond},
		{LoopWait: -time.Second},
		{Zones: []string{"a", "b", "c", "d"}},
		{Password: "a\x00b"},
	} {
		if pc, err := NewPatroni(ctx, o); err == nil {
			_ = pc.Close()
			t.Errorf("NewPatroni(%+v) succeeded", o)
		}
	}
}

// fatalTB records Fatal instead of failing the real test.
type fatalTB struct {
	testing.TB
	msg     string
	skipped bool
}

// Fatal records the message and ends the goroutine, as testing.T does.
func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

// Skip records that the test would have been skipped.
func (f *fatalTB) Skip(...any) {
	f.skipped = true
	runtime.Goexit()
}

// TestPatroniMissing checks that a machine without Patroni fails the test
// (never skips it) and says which packages to install.
func TestPatroniMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ctx := testCtx(t)
	_, err := NewPatroni(ctx, PatroniOptions{})
	if !errors.Is(err, ErrNoPatroni) {
		t.Fatalf("NewPatroni without programs: %v, want ErrNoPatroni", err)
	}
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		StartPatroni(f, PatroniOptions{})
	}()
	<-done
	if f.skipped || !strings.Contains(f.msg, "patroni") || !strings.Contains(f.msg, "etcd-server") {
		t.Fatalf("StartPatroni without programs: skipped=%v, message %q; want a failure naming the packages", f.skipped, f.msg)
	}
}
