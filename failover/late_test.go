package failover_test

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
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
	c := failovertest.Start(t, failovertest.Replicas(0))
	proxy := startProxy(t, c.Primary())
	addr := proxy.Addr()
	dsn := strings.Replace(c.Primary().ConnString("health_probe_interval=1h"), c.Primary().Addr(), addr, 1)
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
	err = pool.QueryRow(ctx, "SELECT 7 FROM pg_sleep(0.2) /* late-second-8a2c */").Scan(&v)
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
