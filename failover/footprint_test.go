package failover_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// TestIdlePoolFootprint: ten idle Pools over a primary and two replicas
// hold at most one connection per Pool on each server they use, and none
// on a replica they do not use: after New, the primary only (the probe's
// connection); after a write, still one there (the probe rides on the
// calls' idle connection); after the Readers have read, one on each
// server, but for the Reader's own on the primary when it read there.
func TestIdlePoolFootprint(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	const pools = 10
	dsn := c.ConnString("application_name=footprint")
	ps := make([]*failover.Pool, pools)
	for i := range ps {
		ps[i] = newPool(t, ctx, dsn)
	}
	// held is how many connections of the Pools each server has, in node
	// order.
	held := func() []int {
		out := make([]int, 0, 3)
		for _, n := range c.Nodes() {
			rows, err := n.Query(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'footprint'`)
			if err != nil {
				t.Fatal(err)
			}
			var k int
			for rows.Next() {
				if err := rows.Scan(&k); err != nil {
					t.Fatal(err)
				}
			}
			rows.Close()
			out = append(out, k)
		}
		return out
	}
	settle := func(stage string, want func(primary int, replicas []int) bool) {
		t.Helper()
		var last []int
		deadline := time.Now().Add(20 * time.Second)
		for {
			last = held()
			if want(last[0], last[1:]) {
				t.Logf("%s: connections per server (primary, replicas) %v for %d Pools", stage, last, pools)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: connections per server (primary, replicas) %v for %d Pools", stage, last, pools)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	atMost := func(limit int) func(int, []int) bool {
		return func(p int, rs []int) bool {
			for _, r := range rs {
				if r > limit {
					return false
				}
			}
			return p <= pools
		}
	}

	settle("after New", atMost(0))
	for i, p := range ps {
		if _, err := p.Exec(ctx, fmt.Sprintf("SELECT %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	settle("after a call each", atMost(0))
	for _, p := range ps {
		for _, h := range p.Stat().Hosts() {
			if h.ProbeConn {
				t.Errorf("after a call: the probe holds a connection of its own on %s (%v)", h.Addr, h.Role)
			}
		}
	}
	for _, p := range ps {
		var one int
		if err := p.Reader().QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
	}
	// Each Pool holds one connection of its calls pool on the primary,
	// and its Reader's own when it read there (its replicas not known
	// fresh enough yet): nothing else, not a probe's own, nor a second of
	// its calls pool's, which a call that met the probe's loan opened
	// (TestProbeLoanLeavesNoSurplus).
	settle("after a read each", func(p int, rs []int) bool {
		reads := 0
		for _, pl := range ps {
			h := hostStat(t, pl, c.Primary().Addr())
			if h.ProbeConn || h.Pool.TotalConns() != 1 {
				return false
			}
			reads += int(h.Reads.TotalConns())
		}
		return p == pools+reads && atMost(pools)(pools, rs)
	})
}

// TestProbeOnAPoolConnSkipsPrepareConn: the probe asks on the calls'
// idle connection, but that is no acquire of the user's: their
// PrepareConn hook is not called for it.
func TestProbeOnAPoolConnSkipsPrepareConn(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	cfg, err := failover.ParseConfig(c.ConnStringFor([]*failovertest.Node{c.Primary()}, "health_probe_interval=50ms"))
	if err != nil {
		t.Fatal(err)
	}
	var prepared atomic.Int64
	cfg.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) {
		prepared.Add(1)
		return true, nil
	}
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	after := prepared.Load()
	waitUntil(t, 10*time.Second, "the probe on the calls' connection", func() bool {
		return !hostStat(t, pool, c.Primary().Addr()).ProbeConn
	})
	probes := hostStat(t, pool, c.Primary().Addr()).Probes
	waitUntil(t, 10*time.Second, "three more probes", func() bool {
		return hostStat(t, pool, c.Primary().Addr()).Probes >= probes+3
	})
	if got := prepared.Load(); got != after {
		t.Errorf("PrepareConn called %d times more while only the probe used the connection", got-after)
	}
}

// TestProbeLoanLeavesNoSurplus: a call that finds the calls pool's one
// connection lent to the probe opens another; once the probe gives its
// loan back, the pool is back to one connection, not two for as long as
// pgxpool keeps an idle one. The probe's question is held back on the
// wire while the call runs.
func TestProbeLoanLeavesNoSurplus(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c, proxy, pool, _ := startBehindProxy(t, ctx, "health_probe_interval=100ms&health_probe_timeout=1m")
	if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	calls := func() int32 { return pool.Stat().Hosts()[0].Pool.TotalConns() }
	waitUntil(t, 10*time.Second, "the probe on the calls' connection", func() bool {
		h := pool.Stat().Hosts()[0]
		return !h.ProbeConn && h.Pool.TotalConns() == 1
	})

	// Hold the calls' connection, and wait until the probe asked on it.
	admin, err := c.Primary().Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var pid, port int
	if err := admin.QueryRow(ctx, `SELECT pid, client_port FROM pg_stat_activity
		WHERE (query = 'SELECT 1' OR strpos(query, 'pgfailover.zone') > 0) AND pid <> pg_backend_pid()`).Scan(&pid, &port); err != nil {
		t.Fatal(err)
	}
	release := holdProbe(t, ctx, admin, proxy, pid, port)
	defer release()

	if _, err := pool.Exec(ctx, "SELECT 2"); err != nil {
		t.Fatal(err)
	}
	if n := calls(); n != 2 {
		t.Fatalf("the calls pool holds %d connections while the probe holds its one; want a second opened", n)
	}
	release()
	waitUntil(t, 10*time.Second, "the calls pool back to one connection", func() bool { return calls() == 1 })
}
