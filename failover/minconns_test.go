package failover_test

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// countDials makes cfg count the connections its hosts' pools and probes
// dial: BeforeConnect runs before each one. The Pool's own check, which
// refuses to dial a host that cannot take calls, runs before it, so what is
// counted is what reached the network.
func countDials(cfg *failover.Config) func(*failovertest.Node) int {
	var mu sync.Mutex
	dials := map[string]int{} // by the address dialled, as Node.Addr gives it
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		mu.Lock()
		defer mu.Unlock()
		dials[net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))]++
		return nil
	}
	return func(n *failovertest.Node) int {
		mu.Lock()
		defer mu.Unlock()
		return dials[n.Addr()]
	}
}

// TestMinConnsDoNotHammerAWrongRoleHost checks that pool_min_conns does not
// make the Pool reconnect over and over to a host in the wrong role for its
// target. pgxpool keeps opening connections up to MinConns; the replica
// refuses each one (role check), and closing a host's connections on every
// probe would start that again each time.
func TestMinConnsDoNotHammerAWrongRoleHost(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	replica := c.Replicas()[0]
	cfg, err := failover.ParseConfig(c.ConnString("pool_min_conns=2&health_probe_interval=500ms"))
	if err != nil {
		t.Fatal(err)
	}
	dials := countDials(cfg)
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	// A read puts the replica in use, so that its probe keeps a
	// connection there (a replica the Pool does not use is probed on a
	// connection given up after each answer, a dial each).
	var one int
	if err := pool.Reader().QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	probes := func() int64 { return hostStat(t, pool, replica.Addr()).Probes }
	// Five probes at 500 ms: the 2.5 s in which the Pool used to dial the
	// replica a dozen times.
	start := probes()
	waitUntil(t, 10*time.Second, "five probes of the replica", func() bool { return probes() >= start+5 })
	n := dials(replica)
	// The probe keeps one connection open; pgxpool's first fill is two
	// attempts, and one more pair may follow when the role is first seen;
	// the read opened one more.
	if n > 6 {
		t.Errorf("%d connection attempts to the replica in %d probes; want at most 6", n, probes())
	}
	t.Logf("%d connection attempts to the replica on port %d", n, replica.Port())
}
