package failover_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// TestFleetFailoverDrill measures what a failover costs the cluster when
// many application instances ride it out together: fleetPools Pools with
// default settings and two writers each, on one primary and one replica;
// the primary is killed and the replica promoted fleetOutage later. It
// reports, per Pool, the probes the replica answered per second of the
// outage, the connection attempts the dead primary received (counted by a
// TCP proxy in front of it), the replica's server CPU over the outage (in
// its probe sessions, and in the logins of the connections each Pool opens
// there ahead of the promotion), and the time from the promotion (the
// first write the replica takes, as pollWritable sees it) to each Pool's
// first acknowledged write. It asserts no timing; it fails only when a
// write fails other than in flight at the crash.
//
//	go test -race -count=1 -run '^TestFleetFailoverDrill$' -v ./failover/
func TestFleetFailoverDrill(t *testing.T) {
	skipUnderShort(t)
	const (
		fleetPools   = 10
		fleetWriters = 2
		fleetOutage  = 3 * time.Second
	)
	ctx := testContext(t)
	// A replica whose primary is gone relaunches its WAL receiver every
	// wal_retrieve_retry_interval, at about 33 ms of CPU each: keep that
	// out of what the clients cost it.
	c := pgtest.Start(t, pgtest.Options{Replicas: 1, Settings: map[string]string{"wal_retrieve_retry_interval": "30s"}})
	old, next := c.Primary(), c.Replicas()[0]
	proxy := startCountingProxy(t, old.Addr())

	dsn := strings.Replace(c.ConnStringFor([]*pgtest.Node{old, next}, ""), old.Addr(), proxy.addr(), 1)
	// Each Pool logs to a handler of its own, whose records say when it
	// learnt of the promotion, without polling its Stat.
	pools := make([]*failover.Pool, fleetPools)
	logs := make([]*recordingHandler, fleetPools)
	for i := range pools {
		cfg, err := failover.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = &recordingHandler{}
		cfg.Logger = slog.New(logs[i])
		if pools[i], err = failover.NewWithConfig(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pools[i].Close)
	}
	if _, err := pools[0].Exec(ctx, "CREATE TABLE writes (id bigint); CREATE TABLE writable (at timestamptz)"); err != nil {
		t.Fatal(err)
	}

	// Each Pool's writers keep the times of the writes acknowledged after
	// the crash, and every error.
	type fleetPool struct {
		mu    sync.Mutex // guards the fields below
		acks  []time.Time
		errs  []error
		acked atomic.Int64
	}
	var crashedAt atomic.Int64 // Unix nanoseconds; 0 before the crash
	fleet := make([]*fleetPool, fleetPools)
	var loops []*loop
	for i, pool := range pools {
		fp := &fleetPool{}
		fleet[i] = fp
		loops = append(loops, startLoop(t, fleetWriters, func() {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := pool.Exec(cctx, "INSERT INTO writes VALUES (1)")
			now := time.Now()
			fp.mu.Lock()
			defer fp.mu.Unlock()
			if err != nil {
				fp.errs = append(fp.errs, err)
				return
			}
			fp.acked.Add(1)
			if at := crashedAt.Load(); at != 0 && now.UnixNano() > at {
				// Acknowledged once the old primary was gone: the new one
				// took it.
				fp.acks = append(fp.acks, now)
			}
		}))
	}
	defer func() {
		for _, l := range loops {
			l.stop()
		}
	}()
	waitUntil(t, time.Minute, "writes through every Pool", func() bool {
		for _, fp := range fleet {
			if fp.acked.Load() < 10 {
				return false
			}
		}
		return true
	})

	probes := func(n *pgtest.Node) []int64 {
		out := make([]int64, len(pools))
		for i, p := range pools {
			out[i] = hostStat(t, p, n.Addr()).Probes
		}
		return out
	}
	admin, err := next.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())

	// The sessions on the replica before the crash: those opened after it
	// are the Pools' connections ready for the promotion.
	sessionsBefore, err := next.BackendCPUTimes()
	if err != nil {
		t.Fatal(err)
	}
	// The crash. The proxy's count and the replica's CPU start when the
	// primary is gone.
	if err := old.Stop(ctx, pgtest.Immediate); err != nil {
		t.Fatal(err)
	}
	crashed := time.Now()
	crashedAt.Store(crashed.UnixNano())
	dialsBefore := proxy.count.Load()
	probesBefore := probes(next)
	cpuBefore, err := next.CPUTime()
	if err != nil {
		t.Fatalf("the replica's CPU time: %v", err)
	}
	backendsBefore, err := next.BackendCPUTimes()
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the old primary known down everywhere", func() bool {
		for _, p := range pools {
			if hostStat(t, p, proxy.addr()).State != hosthealth.TransportError {
				return false
			}
		}
		return true
	})
	// A cluster manager promotes after a while; the writers wait meanwhile.
	for time.Since(crashed) < fleetOutage {
		time.Sleep(10 * time.Millisecond)
	}
	cpuAfter, err := next.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	backendsAfter, err := next.BackendCPUTimes()
	if err != nil {
		t.Fatal(err)
	}
	outage := time.Since(crashed)
	// The Pools' probe sessions are those whose last statement was a
	// probe; the others opened during the outage are the connections each
	// Pool opens ahead of the promotion.
	rows, err := admin.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE query LIKE '%pgfailover.zone%' AND pid <> pg_backend_pid()`)
	if err != nil {
		t.Fatal(err)
	}
	probePIDs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	var probeCPU, readyCPU time.Duration
	var ready int
	for pid, after := range backendsAfter {
		if _, existed := sessionsBefore[pid]; !existed {
			ready++
			readyCPU += after
		}
		if slices.Contains(probePIDs, pid) {
			probeCPU += after - backendsBefore[pid]
		}
	}
	dials := proxy.count.Load() - dialsBefore
	probesAfter := probes(next)

	poller, err := next.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer poller.Close(context.Background())
	writable := make(chan writableAt, 1)
	go func() { writable <- pollWritable(ctx, poller) }()
	if _, err := admin.Exec(ctx, "SELECT pg_promote(false)"); err != nil {
		t.Fatal(err)
	}
	w := <-writable
	if w.err != nil {
		t.Fatal(w.err)
	}
	promoted := w.at
	waitUntil(t, time.Minute, "a write through every Pool after the promotion", func() bool {
		for _, fp := range fleet {
			fp.mu.Lock()
			n := len(fp.acks)
			fp.mu.Unlock()
			if n == 0 {
				return false
			}
		}
		return true
	})
	for _, l := range loops {
		l.stop()
	}
	// When each Pool learnt of the promotion: its log line of the change.
	seen := make([]time.Time, len(pools))
	for i, h := range logs {
		for _, r := range h.since(crashed) {
			if strings.HasPrefix(r.text, "pgfailover: host changed") && strings.Contains(r.text, "host="+next.Addr()) && strings.Contains(r.text, " role=primary") {
				seen[i] = r.Time
				break
			}
		}
		if seen[i].IsZero() {
			t.Errorf("pool %d logged no change of %s to the primary", i, next.Addr())
		}
	}

	secs := outage.Seconds()
	var firsts, learnt []time.Duration
	var inFlight, failed int
	for i, fp := range fleet {
		fp.mu.Lock()
		first := fp.acks[0].Sub(promoted)
		for _, err := range fp.errs {
			if errors.Is(err, failover.ErrCommitOutcomeUnknown) {
				inFlight++
			} else {
				failed++
				t.Errorf("pool %d: a write failed with %v", i, err)
			}
		}
		fp.mu.Unlock()
		firsts = append(firsts, first)
		learnt = append(learnt, seen[i].Sub(promoted))
		t.Logf("pool %d: %.0f probes/s to the replica; after the promotion its probe saw it %v, its first write %v",
			i, float64(probesAfter[i]-probesBefore[i])/secs, seen[i].Sub(promoted).Round(100*time.Microsecond), first.Round(100*time.Microsecond))
	}
	slices.Sort(firsts)
	slices.Sort(learnt)
	var allProbes int64
	for i := range pools {
		allProbes += probesAfter[i] - probesBefore[i]
	}
	cpu := cpuAfter - cpuBefore
	perProbe := time.Duration(0)
	if allProbes > 0 {
		perProbe = probeCPU / time.Duration(allProbes)
	}
	t.Logf("%d Pools x %d writers, outage %v (the replica promoted %v after the crash):", fleetPools, fleetWriters,
		outage.Round(time.Millisecond), promoted.Sub(crashed).Round(time.Millisecond))
	t.Logf("  probes to the replica: %.0f/s in all, %.1f/s per Pool", float64(allProbes)/secs, float64(allProbes)/secs/fleetPools)
	t.Logf("  connection attempts to the dead primary: %d in all, %.1f/s per Pool", dials, float64(dials)/secs/fleetPools)
	t.Logf("  replica CPU, the probes' sessions: %v, %.1f ms per second of outage, %.2f ms/s per Pool, %v per probe",
		probeCPU.Round(100*time.Microsecond), ms(probeCPU)/secs, ms(probeCPU)/secs/fleetPools, perProbe.Round(time.Microsecond))
	t.Logf("  replica CPU, the %d sessions opened during the outage (ready for the promotion): %v, %.2f ms per session",
		ready, readyCPU.Round(100*time.Microsecond), ms(readyCPU)/float64(max(ready, 1)))
	// The sessions' figures are the scheduler's, in nanoseconds; this one
	// is the kernel's tick accounting of every process, in 10 ms steps,
	// and can read below their sum.
	t.Logf("  replica CPU, every server process (/proc/PID/stat, 10 ms ticks): %v, %.1f ms per second of outage", cpu, ms(cpu)/secs)
	t.Logf("  promotion to first write: median %v, min %v, max %v",
		firsts[len(firsts)/2].Round(100*time.Microsecond), firsts[0].Round(100*time.Microsecond), firsts[len(firsts)-1].Round(100*time.Microsecond))
	t.Logf("  promotion to the probe's news: median %v, max %v", learnt[len(learnt)/2].Round(100*time.Microsecond), learnt[len(learnt)-1].Round(100*time.Microsecond))
	t.Logf("  writes failed in flight (ErrCommitOutcomeUnknown): %d, otherwise: %d", inFlight, failed)
	if inFlight > fleetPools*fleetWriters {
		t.Errorf("%d writes failed in flight; at most the %d writers' may", inFlight, fleetPools*fleetWriters)
	}
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// countingProxy forwards TCP connections to one upstream address and
// counts the connections it accepts, upstream up or not.
type countingProxy struct {
	ln    net.Listener
	to    string
	count atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex // guards conns
	conns []net.Conn
}

func startCountingProxy(t *testing.T, upstream string) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{ln: ln, to: upstream}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *countingProxy) addr() string { return p.ln.Addr().String() }

func (p *countingProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.count.Add(1)
		p.wg.Go(func() {
			server, err := net.DialTimeout("tcp", p.to, time.Second)
			if err != nil {
				client.Close()
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, client, server)
			p.mu.Unlock()
			var pipes sync.WaitGroup
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
			}
			pipes.Go(func() { pipe(server, client) })
			pipes.Go(func() { pipe(client, server) })
			pipes.Wait()
		})
	}
}
