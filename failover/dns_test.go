package failover_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/internal/faultproxy"
)

// TestWritesFollowAMovingDNSName: the Pool names one DNS name, which the
// test resolves (pgconn's LookupFunc). It leads to the primary through
// 127.0.0.2 and, endpointLag after a switchover, to the new primary
// through 127.0.0.3, on the same port, as a name whose TTL lags behind a
// failover does. Writes resume once the name moves; every acknowledged
// write is on the new primary exactly once.
func TestWritesFollowAMovingDNSName(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(1), failovertest.SyncReplication())
	old, next := c.Primary(), c.Replicas()[0]
	first, err := faultproxy.Listen("127.0.0.2:0", old.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Close() })
	_, port, _ := net.SplitHostPort(first.Addr())
	second, err := faultproxy.Listen(net.JoinHostPort("127.0.0.3", port), next.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Close() })

	const name = "db.pgfailover.test"
	var resolvesTo atomic.Value
	resolvesTo.Store("127.0.0.2")
	var lookups atomic.Int64
	cfg, err := failover.ParseConfig(strings.Replace(c.ConnStringFor([]*failovertest.Node{old}, "pool_max_conns=4"), old.Addr(), net.JoinHostPort(name, port), 1))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.LookupFunc = func(ctx context.Context, host string) ([]string, error) {
		if host != name {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		lookups.Add(1)
		return []string{resolvesTo.Load().(string)}, nil
	}
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	w := startWriters(t, ctx, pool, 4)
	waitUntil(t, 30*time.Second, "writes before the switchover", func() bool { return w.okCount() >= 20 })

	if _, err := c.Switchover(ctx, next); err != nil {
		t.Fatal(err)
	}
	pause(t, ctx, endpointLag) // the scenario: the name's TTL
	resolvesTo.Store("127.0.0.3")
	moved := time.Now()
	t.Logf("first write acknowledged %v after the name moved (%d lookups in all)", firstWriteAfter(t, w, moved), lookups.Load())
	w.stop()
	checkAcked(t, ctx, pool, w)
	checkOnlyInFlightWritesFailed(t, w, 4)
}
