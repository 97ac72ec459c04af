package failover_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/faultproxy"
)

// TestLateFailureIsOlderNews: a call's failure that reaches the Pool
// after the host has failed and been seen again since the call began is
// older news than that failure, and does not mark the host failed again.
// The news is held back on the wire: the first call's backend is
// terminated while the proxy keeps what the server sends on that one
// connection; a second call then meets the same kind of failure, the Pool
// marks the host failed, the probe finds it again and the second call is
// replayed there; only then does the first call hear of its end.
func TestLateFailureIsOlderNews(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c, proxy, pool, logs := startBehindProxy(t, ctx, "health_probe_interval=1h")
	addr := proxy.Addr()
	if _, err := pool.Exec(ctx, "CREATE TABLE late (n int)"); err != nil {
		t.Fatal(err)
	}

	// The first call: a write whose end is held back.
	var release func()
	var wg sync.WaitGroup
	wg.Go(func() {
		whenExecuting(t, ctx, c.Primary(), "late-first-5d1e", func(admin *pgx.Conn, pid int32) error {
			var port int
			if err := admin.QueryRow(ctx, "SELECT client_port FROM pg_stat_activity WHERE pid = $1", pid).Scan(&port); err != nil {
				return err
			}
			release = proxy.Hold(port)
			_, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1, 10000)", pid)
			return err
		})
	})
	first := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, "INSERT INTO late SELECT 1 FROM pg_sleep(60) /* late-first-5d1e */")
		first <- err
	}()
	wg.Wait()
	if release == nil {
		t.Fatal("the first call never ran")
	}
	defer release()
	heldAt := time.Now()

	// The second call meets a failure of the same host, on a connection
	// opened after the hold, and is replayed once the host is back.
	wg.Go(func() { terminateWhenRunning(t, ctx, c.Primary(), "late-second-8a2c") })
	var v int
	err := pool.QueryRow(ctx, "SELECT 7 FROM pg_sleep(0.2) /* late-second-8a2c */").Scan(&v)
	wg.Wait()
	if err != nil || v != 7 {
		t.Fatalf("the second call = %d, %v; want 7, replayed", v, err)
	}
	if failures := failuresLogged(logs, heldAt, addr); failures != 1 {
		t.Fatalf("host marked failed %d times by the second call; want once", failures)
	}

	select {
	case err := <-first:
		t.Fatalf("the first call returned while its end was held back: %v", err)
	default:
	}
	release()
	if err := <-first; err == nil {
		t.Fatal("the first call, whose backend was terminated, succeeded")
	}
	if failures := failuresLogged(logs, heldAt, addr); failures != 1 {
		t.Fatalf("host marked failed %d times after the first call's late news; want once, by the second call", failures)
	}
	if st := pool.Stat().Hosts()[0]; st.State != hosthealth.Healthy {
		t.Fatalf("after the first call's late news the host is %v; want it still healthy", st.State)
	}
}

// startBehindProxy starts a cluster of one server, a proxy in front of
// it, and a Pool on the proxy with params, whose logs the test reads.
func startBehindProxy(t *testing.T, ctx context.Context, params string) (*failovertest.Cluster, *faultproxy.Proxy, *failover.Pool, *recordingHandler) {
	t.Helper()
	c := failovertest.Start(t, failovertest.Replicas(0))
	proxy := startProxy(t, c.Primary())
	dsn := strings.Replace(c.Primary().ConnString(params), c.Primary().Addr(), proxy.Addr(), 1)
	cfg, err := failover.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	logs := &recordingHandler{}
	cfg.Logger = slog.New(logs)
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return c, proxy, pool, logs
}

// holdProbe holds back what the server sends on the session with backend
// pid and client port port, reached through proxy, and returns once a
// probe has asked on it since: the probe's answer waits until release.
func holdProbe(t *testing.T, ctx context.Context, admin *pgx.Conn, proxy *faultproxy.Proxy, pid, port int) (release func()) {
	t.Helper()
	release = proxy.Hold(port)
	var heldAt time.Time
	if err := admin.QueryRow(ctx, "SELECT now()").Scan(&heldAt); err != nil {
		release()
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "a probe asked on the held session", func() bool {
		var asked bool
		return admin.QueryRow(ctx, `SELECT query_start > $2 AND strpos(query, 'pgfailover.zone') > 0
			FROM pg_stat_activity WHERE pid = $1`, pid, heldAt).Scan(&asked) == nil && asked
	})
	return release
}

// failuresLogged counts the changes of the host at addr to a failed
// state the Pool logged after t.
func failuresLogged(logs *recordingHandler, t time.Time, addr string) int {
	n := 0
	for _, r := range logs.since(t) {
		if strings.HasPrefix(r.text, "pgfailover: host changed") && strings.Contains(r.text, " host="+addr+" ") &&
			!strings.Contains(r.text, " state=healthy ") && strings.Contains(r.text, " was=healthy ") {
			n++
		}
	}
	return n
}

// TestLateProbeAnswerIsOlderNews: a probe's answer that reaches the Pool
// after a failure of the host recorded since the probe asked says nothing
// of the host now, and does not mark it healthy. The probe's answer is
// held back on the wire while the server stops and a call finds it gone.
func TestLateProbeAnswerIsOlderNews(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	// Probes every 100ms, and a held one is not given up before the test
	// releases it.
	c, proxy, pool, logs := startBehindProxy(t, ctx, "health_probe_interval=100ms&health_probe_timeout=1m")
	addr := proxy.Addr()

	// Hold the connection the probe asks on, and wait until it has asked
	// there since: its answer is on the way, held.
	admin, err := c.Primary().Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pid, port int
	waitUntil(t, 30*time.Second, "a probe's session", func() bool {
		return admin.QueryRow(ctx, `SELECT pid, client_port FROM pg_stat_activity
			WHERE strpos(query, 'pgfailover.zone') > 0 AND pid <> pg_backend_pid() LIMIT 1`).Scan(&pid, &port) == nil
	})
	release := holdProbe(t, ctx, admin, proxy, pid, port)
	defer release()
	admin.Close(ctx)

	// The server stops; a call finds it gone, and the host is marked.
	stoppedAt := time.Now()
	if err := c.Primary().Stop(ctx); err != nil {
		t.Fatal(err)
	}
	callCtx, cancel := context.WithTimeout(ctx, time.Second)
	_, err = pool.Exec(callCtx, "SELECT 1")
	cancel()
	if err == nil {
		t.Fatal("a call succeeded on a stopped server")
	}
	waitUntil(t, 30*time.Second, "the host marked failed", func() bool { return failuresLogged(logs, stoppedAt, addr) >= 1 })

	// The probe's answer arrives; the probe after it shows it was taken.
	probes := pool.Stat().Hosts()[0].Probes
	release()
	waitUntil(t, 30*time.Second, "the next probe", func() bool { return pool.Stat().Hosts()[0].Probes > probes })
	for _, r := range logs.since(stoppedAt) {
		if strings.Contains(r.text, " host="+addr+" ") && strings.Contains(r.text, " state=healthy ") {
			t.Fatalf("the probe's late answer made the stopped host healthy: %s", r.text)
		}
	}
	if st := pool.Stat().Hosts()[0]; st.State == hosthealth.Healthy {
		t.Fatal("the stopped host is healthy after the probe's late answer")
	}
}

// TestLateRefusalIsOlderNews: a write refused by a read-only server,
// whose refusal reaches the Pool only after the host failed and was seen
// again as a primary, does not make the host a replica. The server is a
// primary fenced read-only by its configuration, as an operator fences
// one, and unfenced while the refusal is held back on the wire.
func TestLateRefusalIsOlderNews(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c, proxy, pool, logs := startBehindProxy(t, ctx, "health_probe_interval=1h")
	addr := proxy.Addr()
	if _, err := pool.Exec(ctx, "CREATE TABLE fenced (n int) /* late-refusal-3f0b */"); err != nil {
		t.Fatal(err)
	}
	admin, err := c.Primary().Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	fence := func(on bool) {
		t.Helper()
		set := "ALTER SYSTEM RESET default_transaction_read_only"
		if on {
			set = "ALTER SYSTEM SET default_transaction_read_only = on"
		}
		for _, sql := range []string{set, "SELECT pg_reload_conf()"} {
			if _, err := admin.Exec(ctx, sql); err != nil {
				t.Fatal(err)
			}
		}
		// The server signals its sessions once it has read the file
		// again: this one sees the setting once every one has been told.
		want := map[bool]string{true: "on", false: "off"}[on]
		waitUntil(t, 30*time.Second, "the configuration read again", func() bool {
			var got string
			return admin.QueryRow(ctx, "SHOW default_transaction_read_only").Scan(&got) == nil && got == want
		})
	}

	// Hold the session of the Pool's one connection, fence the server and
	// write on it: the server refuses, and the refusal waits on the wire.
	var pid, port int
	if err := admin.QueryRow(ctx, `SELECT pid, client_port FROM pg_stat_activity
		WHERE strpos(query, 'late-refusal-3f0b') > 0 AND pid <> pg_backend_pid()`).Scan(&pid, &port); err != nil {
		t.Fatal(err)
	}
	fence(true)
	release := proxy.Hold(port)
	defer release()
	heldAt := time.Now()
	write := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, "INSERT INTO fenced VALUES (1) /* late-refusal-write */")
		write <- err
	}()
	waitUntil(t, 30*time.Second, "the server's refusal", func() bool {
		var refused bool
		return admin.QueryRow(ctx, `SELECT state = 'idle' AND strpos(query, 'late-refusal-write') > 0
			FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&refused) == nil && refused
	})
	var rows int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM fenced").Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("the fenced server took the write: %d rows, %v", rows, err)
	}
	// The session ends behind its refusal, so that the Pool cannot ask it
	// why it refused (the fence is gone by then): the refusal is all
	// that reaches it.
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1, 10000)", pid); err != nil {
		t.Fatal(err)
	}
	fence(false)

	// A read meets a failure of the host, which the probe then finds a
	// primary again; the read is replayed there.
	var wg sync.WaitGroup
	wg.Go(func() { terminateWhenRunning(t, ctx, c.Primary(), "late-refusal-read") })
	var v int
	err = pool.QueryRow(ctx, "SELECT 7 FROM pg_sleep(0.2) /* late-refusal-read */").Scan(&v)
	wg.Wait()
	if err != nil || v != 7 {
		t.Fatalf("the read = %d, %v; want 7, replayed", v, err)
	}
	if failures := failuresLogged(logs, heldAt, addr); failures != 1 {
		t.Fatalf("host marked failed %d times by the read; want once", failures)
	}

	// The refusal arrives. The write did not run, and may run again on
	// the primary; what matters is the host's role.
	release()
	t.Logf("the write: %v", <-write)
	for _, r := range logs.since(heldAt) {
		if strings.Contains(r.text, " host="+addr+" ") && strings.Contains(r.text, " role=replica ") {
			t.Fatalf("the late refusal made the primary a replica: %s", r.text)
		}
	}
	if st := pool.Stat().Hosts()[0]; st.Role != hosthealth.RolePrimary || st.State != hosthealth.Healthy {
		t.Fatalf("after the late refusal the host is %v, %v; want a healthy primary", st.State, st.Role)
	}
}
