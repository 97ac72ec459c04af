package kubernetes_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/kubernetes/kubetest"
	"github.com/pgfailover/pgfailover/topology"
)

// claims returns a condition on a topology: addr is claimed primary.
func claims(addr string) func(topology.Topology) bool {
	return func(t topology.Topology) bool {
		for _, m := range t.Members {
			if m.Addr() == addr && m.Role == hosthealth.RolePrimary {
				return true
			}
		}
		return false
	}
}

// has returns a condition on a topology: addr is a member.
func has(addr string) func(topology.Topology) bool {
	return func(t topology.Topology) bool {
		for _, m := range t.Members {
			if m.Addr() == addr {
				return true
			}
		}
		return false
	}
}

func portOf(n *failovertest.Node) int { return n.Port() }

// The drills share one API server; each runs its own cluster in a
// namespace of its own.
func TestDrills(t *testing.T) {
	api := kubetest.StartAPIServer(t)

	// CloudNativePG announces a switchover in targetPrimary: the Pool
	// claims the target at once and drops the old primary, so no new write
	// goes there; the first write lands on the target as soon as it is
	// promoted; nothing acknowledged is lost.
	t.Run("switchover announced by targetPrimary", func(t *testing.T) {
		ctx := testContext(t)
		// Asynchronous replication: a switchover's fast shutdown sends the
		// standbys all of the old primary's WAL, and the new primary's
		// first commit waits for no standby to come back.
		c := kubetest.Start(t, kubetest.OnAPIServer(api), kubetest.Named("switchover"),
			kubetest.PostgreSQL(failovertest.Replicas(2)))
		pool, up := open(t, ctx, c, "pool_max_conns=8")
		l := startLoad(t, ctx, pool, 4, 2)
		from := c.PG.Primary()
		waitUntil(t, 30*time.Second, "writes on the primary", func() bool { return l.writeCount(portOf(from)) >= 100 })
		to, err := c.PG.BestStandby(ctx)
		if err != nil {
			t.Fatal(err)
		}
		probesBefore := probes(pool)
		known := watchRole(ctx, pool, c.PodAddr(to))
		m, err := c.Switchover(ctx, to)
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 30*time.Second, "writes on the new primary", func() bool { return l.writeCount(portOf(to)) >= 100 })
		l.check(t, ctx, pool)
		seen := up.firstAfter(m.Announced.Add(-time.Millisecond), claims(c.PodAddr(to)))
		first, ok := l.firstOn(portOf(to), m.Announced)
		if !ok || seen.IsZero() {
			t.Fatalf("no write on the new primary (%v) or no claim seen (%v)", ok, seen)
		}
		t.Logf("targetPrimary written -> Pool's topology claims it: %s", ms(seen.Sub(m.Announced)))
		t.Logf("targetPrimary written -> new primary writable: %s", ms(m.Writable.Sub(m.Announced)))
		t.Logf("new primary writable -> first write acknowledged there: %s", ms(first.end.Sub(m.Writable)))
		t.Logf("new primary writable -> the Pool's Stat shows it primary: %s", ms((<-known).Sub(m.Writable)))
		t.Logf("writes started after the Pool saw the announcement, acknowledged by the old primary: %d",
			l.startedAfterOn(portOf(from), seen))
		after := probes(pool)
		for addr, n := range after {
			t.Logf("probes during the switchover on %s: %d", addr, n-probesBefore[addr])
		}
		if n := l.startedAfterOn(portOf(from), seen.Add(50*time.Millisecond)); n > 0 {
			t.Errorf("%d writes started well after the announcement went to the old primary", n)
		}
	})

	// Spilo's failover is a label change after the promotion: the Pool
	// follows the new label, and the server's word.
	t.Run("crash and failover by labels", func(t *testing.T) {
		ctx := testContext(t)
		c := kubetest.Start(t, kubetest.OnAPIServer(api), kubetest.Named("failover"), kubetest.WithOperator(kubetest.Spilo),
			kubetest.PostgreSQL(failovertest.Replicas(2), failovertest.SyncReplication()))
		pool, up := open(t, ctx, c, "pool_max_conns=8")
		l := startLoad(t, ctx, pool, 4, 2)
		from := c.PG.Primary()
		waitUntil(t, 30*time.Second, "writes on the primary", func() bool { return l.writeCount(portOf(from)) >= 100 })
		known := watchRole(ctx, pool, c.PodAddr(c.PG.Replicas()[0]), c.PodAddr(c.PG.Replicas()[1]))
		m, err := c.Failover(ctx, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 30*time.Second, "writes on the new primary", func() bool { return l.writeCount(portOf(m.To)) >= 100 })
		l.check(t, ctx, pool)
		first, _ := l.firstOn(portOf(m.To), m.Writable.Add(-time.Second))
		seen := up.firstAfter(m.Writable.Add(-time.Second), claims(c.PodAddr(m.To)))
		t.Logf("new primary writable -> first write acknowledged there: %s", ms(first.end.Sub(m.Writable)))
		if seen.IsZero() {
			t.Fatalf("the new primary's label never reached the Pool's topology as a claim")
		}
		t.Logf("new primary writable -> the Pool's Stat shows it primary: %s", ms((<-known).Sub(m.Writable)))
		t.Logf("labels written -> Pool's topology claims the new primary: %s", ms(seen.Sub(m.Labelled)))
		if err := c.Rejoin(ctx, m.From); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 30*time.Second, "the old primary back as a member", func() bool {
			return !up.firstAfter(m.Labelled, has(c.PodAddr(m.From))).IsZero()
		})
	})

	// A replica's pod moves to another address: reads never fail, and the
	// new address serves reads once the watch reports it.
	t.Run("replica rescheduled", func(t *testing.T) {
		ctx := testContext(t)
		c := kubetest.Start(t, kubetest.OnAPIServer(api), kubetest.Named("reschedule"),
			kubetest.PostgreSQL(failovertest.Replicas(2)))
		pool, up := open(t, ctx, c, "pool_max_conns=8")
		r := c.PG.Replicas()[0]
		l := startLoad(t, ctx, pool, 1, 4)
		waitUntil(t, 30*time.Second, "reads on the replica", func() bool { return l.readCount(portOf(r)) >= 50 })
		old := c.PodAddr(r)
		start := time.Now()
		addr, err := c.Reschedule(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if addr == old {
			t.Fatalf("the pod kept its address %s", addr)
		}
		before := l.readCount(portOf(r))
		waitUntil(t, 30*time.Second, "reads at the new address", func() bool { return l.readCount(portOf(r)) >= before+50 })
		seen := up.firstAfter(start, has(addr))
		t.Logf("pod recreated -> Pool's topology has the new address: %s", ms(seen.Sub(start)))
		hosts := hostAddrs(pool)
		if hosts[old] || !hosts[addr] {
			t.Errorf("hosts %v: want %s and not %s", hosts, addr, old)
		}

		// Steady state: the Pool sends the API server nothing beyond its
		// open watch while calls go on.
		reqBefore, _, err := api.Requests(ctx, "pods")
		if err != nil {
			t.Fatal(err)
		}
		reads := l.readCount(portOf(r))
		waitUntil(t, 30*time.Second, "more reads", func() bool { return l.readCount(portOf(r)) >= reads+500 })
		reqAfter, watches, err := api.Requests(ctx, "pods")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("pod requests while steady: %d LIST, %d GET, %d WATCH ended; %d watches of pods open on the server (the server holds one of its own)",
			reqAfter["LIST"]-reqBefore["LIST"], reqAfter["GET"]-reqBefore["GET"], reqAfter["WATCH"]-reqBefore["WATCH"], watches)
		if reqAfter["LIST"] != reqBefore["LIST"] || reqAfter["WATCH"] != reqBefore["WATCH"] {
			t.Errorf("requests while steady: before %v, after %v", reqBefore, reqAfter)
		}
		l.check(t, ctx, pool)
	})

	// The API server restarts: the watches drop, resume, and the next
	// change still reaches the Pool; while it is down, calls go on.
	t.Run("API server down, watch resumed", func(t *testing.T) {
		ctx := testContext(t)
		c := kubetest.Start(t, kubetest.OnAPIServer(api), kubetest.Named("restart"),
			kubetest.PostgreSQL(failovertest.Replicas(1)))
		pool, up := open(t, ctx, c, "pool_max_conns=8")
		l := startLoad(t, ctx, pool, 2, 2)
		r := c.PG.Replicas()[0]
		waitUntil(t, 30*time.Second, "reads and writes", func() bool {
			return l.readCount(portOf(r)) >= 50 && l.writeCount(0) >= 50
		})
		n := up.count()
		api.Stop()
		w0, r0 := l.writeCount(0), l.readCount(portOf(r))
		waitUntil(t, 30*time.Second, "calls while the API server is down", func() bool {
			return l.writeCount(0) >= w0+200 && l.readCount(portOf(r)) >= r0+200
		})
		if got := up.count(); got != n {
			t.Errorf("%d topology updates while the API server was down", got-n)
		}
		if err := api.Start(ctx); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		addr, err := c.Reschedule(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 60*time.Second, "the rescheduled replica after the restart", func() bool {
			return !up.firstAfter(start, has(addr)).IsZero()
		})
		t.Logf("after the restart, pod recreated -> Pool's topology has it: %s",
			ms(up.firstAfter(start, has(addr)).Sub(start)))
		l.check(t, ctx, pool)
	})
}

// watchRole reports when the pool's Stat first shows a host at one of
// addrs in the primary role, polling every millisecond until ctx ends.
func watchRole(ctx context.Context, pool *failover.Pool, addrs ...string) <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		for ctx.Err() == nil {
			for _, h := range pool.Stat().Hosts() {
				if slices.Contains(addrs, h.Addr) && h.Role == hosthealth.RolePrimary {
					out <- time.Now()
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
		out <- time.Time{}
	}()
	return out
}

// probes returns the probes sent so far to each host of the pool.
func probes(pool *failover.Pool) map[string]int64 {
	out := map[string]int64{}
	for _, h := range pool.Stat().Hosts() {
		out[h.Addr] = h.Probes
	}
	return out
}

// hostAddrs returns the pool's hosts.
func hostAddrs(pool *failover.Pool) map[string]bool {
	out := map[string]bool{}
	for _, h := range pool.Stat().Hosts() {
		out[h.Addr] = true
	}
	return out
}
