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
// calls' idle connection); after the Readers have read, at most one on
// each server, but for the Reader's own on the primary when it read
// there.
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
	// A Pool whose Reader read on the primary (its replicas not known
	// fresh enough yet) holds a connection of each of its pools there,
	// and so does one whose calls pool opened a second connection while
	// the probe was asking on the first. Every connection on the primary
	// is one the Pools account for, and none holds more than one of each
	// pool, nor a connection of the probe's own.
	own := func() (held, extra int) {
		for _, p := range ps {
			h := hostStat(t, p, c.Primary().Addr())
			n := int(h.Pool.TotalConns() + h.Reads.TotalConns())
			if h.ProbeConn {
				n++
			}
			held += n
			extra += n - 1
			if n > 2 || h.ProbeConn {
				return held, -1
			}
		}
		return held, extra
	}
	settle("after a read each", func(p int, rs []int) bool {
		held, extra := own()
		return extra >= 0 && p == held && atMost(pools)(p-extra, rs)
	})
	_, extra := own()
	t.Logf("%d of the Pools hold a second connection on the primary", extra)
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
