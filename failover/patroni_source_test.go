package failover_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// apiProxies stands in front of every member's REST API: it counts the
// requests each one gets and can close them all, as a firewall would.
type apiProxies struct {
	servers []*httptest.Server
	counts  []atomic.Int64
}

func newAPIProxies(t *testing.T, pc *pgtest.PatroniCluster) *apiProxies {
	t.Helper()
	urls := pc.APIURLs()
	a := &apiProxies{counts: make([]atomic.Int64, len(urls))}
	for i, raw := range urls {
		target, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.ErrorLog = log.New(io.Discard, "", 0) // requests the Pool gave up on are no news
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a.counts[i].Add(1)
			proxy.ServeHTTP(w, r)
		}))
		a.servers = append(a.servers, s)
		t.Cleanup(s.Close)
	}
	return a
}

// param returns the patroni_api_urls key naming the proxies.
func (a *apiProxies) param() string {
	var urls []string
	for _, s := range a.servers {
		urls = append(urls, s.URL)
	}
	return "patroni_api_urls=" + strings.Join(urls, ",")
}

// total returns the requests every proxy got so far.
func (a *apiProxies) total() []int64 {
	out := make([]int64, len(a.counts))
	for i := range a.counts {
		out[i] = a.counts[i].Load()
	}
	return out
}

// close shuts every proxy: the API can no longer be reached.
func (a *apiProxies) close() {
	for _, s := range a.servers {
		s.CloseClientConnections()
		s.Close()
	}
}

// hostCount returns how many hosts the Pool has.
func hostCount(pool *failover.Pool) int { return len(pool.Stat().Hosts()) }

// discoveredPool waits for a healthy cluster and returns its leader, proxies
// in front of its REST API, and a Pool whose connection string names the
// leader alone (with params) and the proxies, once it has found every
// member.
func discoveredPool(t *testing.T, ctx context.Context, pc *pgtest.PatroniCluster, params string) (*pgtest.PatroniMember, *apiProxies, *failover.Pool) {
	t.Helper()
	leader, _, _ := patroniRoles(t, ctx, pc)
	api := newAPIProxies(t, pc)
	pool := newPool(t, ctx, leader.ConnString(api.param()+params))
	waitUntil(t, 10*time.Second, "every member found", func() bool { return hostCount(pool) == len(pc.Members()) })
	return leader, api, pool
}

// patroniAPIUnreachable: the connection string names the leader only; once
// the members are found, the REST API is closed. A switchover then moves
// the writes to a member found before: the last topology keeps serving.
func patroniAPIUnreachable(t *testing.T, ctx context.Context, pc *pgtest.PatroniCluster) {
	leader, api, pool := discoveredPool(t, ctx, pc, "&patroni_refresh_interval=200ms")
	api.close()
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS api_down (v int)"); err != nil {
		t.Fatal(err)
	}
	_, to, err := pc.Switchover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.WaitNewLeader(ctx, leader); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, patroniCallTimeout)
	defer cancel()
	if _, err := pool.Exec(cctx, "INSERT INTO api_down VALUES (1)"); err != nil {
		t.Fatalf("a write after a switchover with the API unreachable: %v", err)
	}
	if port := serverPort(t, ctx, pool); port != to.Port() {
		t.Fatalf("writes go to port %d, want the new leader %s", port, to)
	}
	if n := hostCount(pool); n != len(pc.Members()) {
		t.Fatalf("the Pool has %d hosts with the API unreachable, want the %d it knew", n, len(pc.Members()))
	}
	t.Logf("with the REST API closed, writes followed the switchover to %s, a member the connection string did not name", to)
}

// patroniHerd: 1,000 goroutines write through one Pool during a
// switchover; the Pool reads GET /cluster once per URL per refresh however
// many of them wait.
func patroniHerd(t *testing.T, ctx context.Context, pc *pgtest.PatroniCluster) {
	leader, api, pool := discoveredPool(t, ctx, pc, "&pool_max_conns=10")
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS herd (v int)"); err != nil {
		t.Fatal(err)
	}
	var ok, failed atomic.Int64
	herd := startLoop(t, 1000, func() {
		cctx, cancel := context.WithTimeout(ctx, patroniCallTimeout)
		defer cancel()
		if _, err := pool.Exec(cctx, "INSERT INTO herd VALUES (1)"); err != nil {
			failed.Add(1)
			return
		}
		ok.Add(1)
	})
	waitUntil(t, 30*time.Second, "the herd writing", func() bool { return ok.Load() > 1000 })
	before, began := api.total(), time.Now()
	if _, _, err := pc.Switchover(ctx); err != nil {
		t.Fatal(err)
	}
	nl, err := pc.WaitNewLeader(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	mark := ok.Load()
	waitUntil(t, 30*time.Second, "the herd writing on "+nl.String(), func() bool { return ok.Load() > mark+1000 })
	window := time.Since(began)
	after := api.total()
	herd.stop()
	// At the refresh interval (3 s) and once per host failure or first
	// waiter, with refreshes asked for while one is under way folded into
	// it: a few per second at most, never one per caller.
	limit := int64(window/time.Second)*3 + 6
	for i := range after {
		n := after[i] - before[i]
		t.Logf("REST API %d: %d GET /cluster in %v of switchover with 1,000 writers", i, n, window.Round(time.Millisecond))
		if n > limit {
			t.Errorf("REST API %d got %d requests in %v, want at most %d", i, n, window.Round(time.Millisecond), limit)
		}
	}
	t.Logf("writes: %d acknowledged, %d failed (in flight at the switchover)", ok.Load(), failed.Load())
}

// patroniRoles waits for a healthy cluster and returns its leader, its
// synchronous standby and its other (asynchronous) replica.
func patroniRoles(t *testing.T, ctx context.Context, pc *pgtest.PatroniCluster) (leader, standby, other *pgtest.PatroniMember) {
	t.Helper()
	if err := pc.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	leader, err := pc.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if standby, err = pc.SyncStandby(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range pc.Members() {
		if m != leader && m != standby {
			other = m
		}
	}
	return leader, standby, other
}

// patroniMembership: a member that leaves the cluster is drained and
// closed; once back, it takes reads through the Reader.
func patroniMembership(t *testing.T, ctx context.Context, pc *pgtest.PatroniCluster) {
	leader, _, m := patroniRoles(t, ctx, pc)
	api := newAPIProxies(t, pc)
	pool := newPool(t, ctx, leader.ConnString(api.param()+"&patroni_refresh_interval=500ms&pin_after_write=0"))
	listed := func() bool {
		for _, h := range pool.Stat().Hosts() {
			if h.Addr == m.Addr() {
				return true
			}
		}
		return false
	}
	waitUntil(t, 10*time.Second, "every member found", func() bool { return hostCount(pool) == len(pc.Members()) })
	if err := pc.KillMember(ctx, m); err != nil {
		t.Fatal(err)
	}
	// Its key in the DCS outlives it by up to the ttl.
	waitUntil(t, 60*time.Second, m.String()+" gone from the Pool", func() bool { return !listed() })
	var failed atomic.Int64
	readers := startLoop(t, 4, func() {
		var one int
		if err := pool.Reader().QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			failed.Add(1)
		}
	})
	if err := pc.RestartMember(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 90*time.Second, m.String()+" back and taking reads", func() bool {
		port, err := readerPort(ctx, pool)
		return err == nil && port == m.Port()
	})
	readers.stop()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d reads failed while the member came back", n)
	}
	t.Logf("%s left the Pool when it left the cluster, and took reads once back", m)
}

// patroniLocalFirst: with fallback_local, calls go to the connection
// string's first host (here a replica, target any); when it dies they go
// to the synchronous standby (the first wave), not to the leader, and no
// read fails; once it is back and its cooldown is over, they return.
func patroniLocalFirst(t *testing.T, ctx context.Context, pc *pgtest.PatroniCluster) {
	leader, standby, local := patroniRoles(t, ctx, pc)
	params := "patroni_api_urls=" + strings.Join(pc.APIURLs(), ",") +
		"&target=any&fallback_local=on&fallback_cooldown=3s&fallback_lifetime=3s&health_probe_interval=200ms"
	meters, _, pool := newObservedPool(t, ctx, local.ConnString(params))
	fallbackHost := func() string {
		for _, dp := range gauges(t, ctx, meters, "pgfailover.fallback.host") {
			if addr := hostOf(dp.Attributes); addr != "" && dp.Value == 1 {
				return addr
			}
		}
		return ""
	}
	type read struct {
		at   time.Time
		port int
		err  error
	}
	var mu sync.Mutex
	var reads []read
	readers := startLoop(t, 4, func() {
		var port int
		err := pool.QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port)
		mu.Lock()
		reads = append(reads, read{time.Now(), port, err})
		mu.Unlock()
	})
	onPort := func(port int, since time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range reads {
			if r.err == nil && r.port == port && r.at.After(since) {
				n++
			}
		}
		return n
	}
	waitUntil(t, 10*time.Second, "reads on the local server", func() bool { return onPort(local.Port(), time.Time{}) > 100 })
	killed := time.Now()
	if err := pc.KillMember(ctx, local); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "reads on the synchronous standby", func() bool { return onPort(standby.Port(), killed) > 100 })
	if got := fallbackHost(); got != standby.Addr() {
		t.Errorf("pgfailover.fallback.host shows %q while reads go to the fallback, want %s", got, standby.Addr())
	}
	if err := pc.RestartMember(ctx, local); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	waitUntil(t, 60*time.Second, "reads back on the local server", func() bool { return onPort(local.Port(), back) > 100 })
	if got := fallbackHost(); got != "" {
		t.Errorf("pgfailover.fallback.host shows %q once the local server is back", got)
	}
	readers.stop()

	mu.Lock()
	defer mu.Unlock()
	var onLeader, leaderAfter, failed int
	var firstOnSync, lastOnSync, firstBack, firstOnLeader time.Time
	for _, r := range reads {
		switch {
		case r.err != nil:
			failed++
			t.Errorf("a read failed: %v", r.err)
		case r.port == leader.Port() && r.at.Before(back):
			// Only the fallback for the kill is asserted: once the local
			// server is restarted, a restart slower than fallback_cooldown
			// fails it again, and the round that follows may find
			// Patroni's synchronous standby moved to it, so that the
			// leader heads the second wave.
			if onLeader == 0 {
				firstOnLeader = r.at
			}
			onLeader++
		case r.port == leader.Port():
			leaderAfter++
		case r.port == local.Port() && r.at.After(back) && firstBack.IsZero():
			firstBack = r.at
		case r.port == standby.Port():
			if firstOnSync.IsZero() {
				firstOnSync = r.at
			}
			lastOnSync = r.at
		}
	}
	if onLeader > 0 {
		t.Errorf("%d reads went to the leader before the local server's restart, the first at kill+%v; the fallback's first wave is the synchronous standby; candidates that failed: %v",
			onLeader, firstOnLeader.Sub(killed).Round(time.Millisecond), candidateFailures(t, ctx, meters))
	}
	t.Logf("%d reads on the leader after the local server's restart", leaderAfter)
	t.Logf("%d reads, %d failed; local %s killed, first read on %s at kill+%v, reads back on the local server after its restart+%v (last on the standby at restart+%v)",
		len(reads), failed, local.Name(), standby.Name(), firstOnSync.Sub(killed).Round(time.Millisecond),
		firstBack.Sub(back).Round(time.Millisecond), lastOnSync.Sub(back).Round(time.Millisecond))
}

// candidateFailures lists pgfailover.fallback.candidate_failures by host
// and reason.
func candidateFailures(t *testing.T, ctx context.Context, r *sdkmetric.ManualReader) []string {
	t.Helper()
	var out []string
	for _, m := range collect(t, ctx, r) {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "pgfailover.fallback.candidate_failures" {
			for _, dp := range sum.DataPoints {
				reason, _ := dp.Attributes.Value("pgfailover.reason")
				out = append(out, fmt.Sprintf("%s %s ×%d", hostOf(dp.Attributes), reason.String(), dp.Value))
			}
		}
	}
	return out
}
