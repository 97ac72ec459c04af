package failovertest_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// TestProxies: with the Proxies option the application's connections pass
// through a proxy per server, and its latency, blackhole and reset reach
// them; without it the network faults fail with ErrNoProxy.
func TestProxies(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Proxies())
	p := c.Primary()
	connect := func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, p.ConnString("")) }
	conn, err := connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	// The address dialled is not the server's own port.
	var port int
	if err := conn.QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port); err != nil {
		t.Fatal(err)
	}
	_, dialled, _ := net.SplitHostPort(p.Addr())
	if dialled == strconv.Itoa(port) {
		t.Fatalf("Addr %s is the server's own port: no proxy in between", p.Addr())
	}
	if p.Port() != port {
		t.Errorf("Port() = %d, want the server's own %d", p.Port(), port)
	}
	if !strings.Contains(c.ConnString(""), p.Addr()) {
		t.Errorf("ConnString %q does not name the proxy %s", c.ConnString(""), p.Addr())
	}

	// Latency: a round trip takes at least twice as long more.
	const d = 150 * time.Millisecond
	if err := p.SetLatency(d); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 2*d {
		t.Errorf("a round trip took %v with %v latency each way", took, d)
	}
	if err := p.SetLatency(0); err != nil {
		t.Fatal(err)
	}

	// Reset: the open connection fails at once, a new one works.
	if err := p.ResetConnections(); err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, "SELECT 1")
	var pgErr *pgconn.PgError
	if err == nil || errors.As(err, &pgErr) {
		t.Errorf("a query on a reset connection: %v, want a network error", err)
	}

	// Blackhole: nothing answers, not even a new connection; mended, a new
	// connection works. The server ran on meanwhile.
	if err := p.SetBlackhole(true); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if other, err := connect(cctx); err == nil {
		other.Close(ctx)
		t.Error("connected through a blackhole")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("connecting through a blackhole: %v, want the caller's deadline", err)
	}
	cancel()
	if err := p.Exec(ctx, "SELECT 1"); err != nil {
		t.Errorf("the server behind the blackhole: %v", err)
	}
	if err := p.SetBlackhole(false); err != nil {
		t.Fatal(err)
	}
	fresh, err := connect(ctx)
	if err != nil {
		t.Fatalf("connecting after the blackhole: %v", err)
	}
	fresh.Close(ctx)
}

// TestNoProxy: the network faults of a cluster without proxies fail
// naming the option.
func TestNoProxy(t *testing.T) {
	t.Parallel()
	c := failovertest.Start(t, failovertest.Replicas(0))
	p := c.Primary()
	for name, err := range map[string]error{
		"SetLatency":       p.SetLatency(time.Second),
		"SetBlackhole":     p.SetBlackhole(true),
		"ResetConnections": p.ResetConnections(),
	} {
		if !errors.Is(err, failovertest.ErrNoProxy) || !strings.Contains(err.Error(), "node0") {
			t.Errorf("%s without proxies: %v, want ErrNoProxy naming node0", name, err)
		}
	}
}
