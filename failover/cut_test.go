package failover_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/internal/faultproxy"
)

// startProxy runs an in-process TCP proxy in front of the server n until
// the test ends and returns it.
func startProxy(t *testing.T, n interface{ Addr() string }) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// cutWhenRunning cuts every connection through the proxy, as a network
// failure would, while the statement containing marker executes on n; new
// connections go through.
func cutWhenRunning(t *testing.T, n *failovertest.Node, p *faultproxy.Proxy, marker string) {
	t.Helper()
	whenExecuting(t, testContext(t), n, marker, func(*pgx.Conn, int32) error {
		p.Cut()
		return nil
	})
}

func TestNetworkCut(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	proxy := startProxy(t, c.Primary())
	dsn := strings.Replace(c.Primary().ConnString("health_probe_interval=1h"), c.Primary().Addr(), proxy.Addr(), 1)
	reader, pool := newMeteredPool(t, ctx, dsn)
	if _, err := pool.Exec(ctx, "CREATE TABLE cut (n int)"); err != nil {
		t.Fatal(err)
	}

	t.Run("a read cut in flight is replayed", func(t *testing.T) {
		var wg sync.WaitGroup
		wg.Go(func() { cutWhenRunning(t, c.Primary(), proxy, "cut-read-1b7f") })
		var v int
		err := pool.QueryRow(ctx, "SELECT 42 FROM pg_sleep(0.5) /* cut-read-1b7f */").Scan(&v)
		wg.Wait()
		if err != nil || v != 42 {
			t.Fatalf("read across a network cut = %d, %v", v, err)
		}
		if got := counters(t, ctx, reader); got["pgfailover.failover.survived"] != 1 {
			t.Fatalf("counters %v: want the read counted as survived", got)
		}
	})

	t.Run("a write cut in flight is not", func(t *testing.T) {
		var wg sync.WaitGroup
		wg.Go(func() { cutWhenRunning(t, c.Primary(), proxy, "cut-write-0c3a") })
		_, err := pool.Exec(ctx, "INSERT INTO cut SELECT 1 FROM pg_sleep(0.5) /* cut-write-0c3a */")
		wg.Wait()
		if !errors.Is(err, failover.ErrCommitOutcomeUnknown) {
			t.Fatalf("write across a network cut: want ErrCommitOutcomeUnknown, got %v", err)
		}
		// The server may or may not have committed it; it ran once at most.
		var n int
		waitUntil(t, 10*time.Second, "the count", func() bool {
			return pool.QueryRow(ctx, "SELECT count(*) FROM cut").Scan(&n) == nil
		})
		if n > 1 {
			t.Fatalf("the write ran %d times", n)
		}
		if got := counters(t, ctx, reader); got["pgfailover.failover.failed"] != 1 {
			t.Fatalf("counters %v: want the write counted as failed", got)
		}
	})
}
