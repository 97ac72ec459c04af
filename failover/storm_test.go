package failover_test

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
)

// TestNoConnectionStorm runs 1,000 writers through one Pool with ten
// connections per host, kills the primary and promotes the replica a
// second later. However many callers there are, each host is dialled at
// most pool_max_conns times plus what its probe dials: callers wait for a
// usable host instead of dialling, and none dials a host known to be down
// or in the wrong role. No write fails but those in flight at the fault,
// and the heap stays bounded. Every dial, the Pool's and its probes', goes
// through the BeforeConnect hook, which counts them; the log compares them
// with the goal of pool_max_conns + 10 per host:
//
//	go test -race -count=1 -run '^TestNoConnectionStorm$' -v ./failover/
func TestNoConnectionStorm(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	old, next := c.Primary(), c.Replicas()[0]
	const maxConns, callers = 10, 1000
	cfg, err := failover.ParseConfig(c.ConnString("pool_max_conns=10"))
	if err != nil {
		t.Fatal(err)
	}
	dials := countDials(cfg)
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE writes (id bigint)"); err != nil {
		t.Fatal(err)
	}

	w := startHerd(t, ctx, pool, callers, 30*time.Second)
	defer w.stop()
	waitUntil(t, 60*time.Second, "writes before the fault", func() bool { return w.acked.Load() >= 2*callers })

	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	probes := func(n *failovertest.Node) int64 { return hostStat(t, pool, n.Addr()).Probes }
	oldDials, oldProbes := dials(old), probes(old)
	nextDials, nextProbes := dials(next), probes(next)

	if err := old.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	ackedAtFault := w.acked.Load()
	waitUntil(t, 30*time.Second, "the old primary known down", func() bool {
		return hostStat(t, pool, old.Addr()).State == hosthealth.TransportError
	})
	// A cluster manager promotes after a while; the writers wait meanwhile.
	time.Sleep(time.Second)
	if err := c.Promote(ctx, next); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "writes on the new primary", func() bool { return w.acked.Load() >= ackedAtFault+2*callers })
	resumed := time.Now()
	w.stop()

	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	dOld, pOld := dials(old)-oldDials, probes(old)-oldProbes
	dNext, pNext := dials(next)-nextDials, probes(next)-nextProbes
	t.Logf("%d callers, %v from the kill to writes on the new primary: the old primary was dialled %d times (%d probes), the new one %d times (%d probes; goal: at most pool_max_conns + 10 = %d per host); heap in use %d MiB before, %d MiB after",
		callers, resumed.Sub(killed).Round(time.Millisecond), dOld, pOld, dNext, pNext, maxConns+10, before.HeapInuse>>20, after.HeapInuse>>20)
	// A probe of a host that is down dials it each time; one of a live host
	// keeps its connection.
	if int64(dOld) > maxConns+pOld {
		t.Errorf("the dead primary was dialled %d times; want at most pool_max_conns (%d) plus its %d probes", dOld, maxConns, pOld)
	}
	if dNext > maxConns+1 {
		t.Errorf("the promoted replica was dialled %d times; want at most pool_max_conns (%d) plus one probe", dNext, maxConns)
	}
	if grown := int64(after.HeapInuse) - int64(before.HeapInuse); grown > 256<<20 {
		t.Errorf("the heap grew by %d MiB during the failover", grown>>20)
	}
	w.checkOnlyInFlightFailed(t, maxConns)
}

// herd is many writers that insert the same row over and over through one
// pool, each call under its own deadline, and count what happened.
type herd struct {
	*loop
	acked atomic.Int64

	mu   sync.Mutex // guards errs
	errs []error
}

func startHerd(t *testing.T, ctx context.Context, pool *failover.Pool, n int, callTimeout time.Duration) *herd {
	h := &herd{}
	h.loop = startLoop(t, n, func() {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		if _, err := pool.Exec(cctx, "INSERT INTO writes VALUES (1)"); err != nil {
			h.mu.Lock()
			h.errs = append(h.errs, err)
			h.mu.Unlock()
			return
		}
		h.acked.Add(1)
	})
	return h
}

// checkOnlyInFlightFailed fails the test unless every failed write failed
// with ErrCommitOutcomeUnknown, and at most inFlight of them did.
func (h *herd) checkOnlyInFlightFailed(t *testing.T, inFlight int) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, err := range h.errs {
		if !errors.Is(err, failover.ErrCommitOutcomeUnknown) {
			t.Errorf("a write failed with %v", err)
			break
		}
	}
	if len(h.errs) > inFlight {
		t.Errorf("%d writes failed; at most the %d in flight at the fault may", len(h.errs), inFlight)
	}
}

// TestRefusedDialMarksHostDown checks that a connection pgxpool fails to
// open because its host refused it marks the host down before pgxpool
// sees the error: pgxpool frees the slot first and hands it to the next
// caller queued in its Acquire, which would otherwise dial the dead host
// too. pgx's connect tracer runs after the dial failed and before pgxpool
// gets the error, so the host's state it reads is what that next caller
// would be routed by. (The Pool's probe keeps its own connection open, so
// no probe dial marks the host first.)
func TestRefusedDialMarksHostDown(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	addr := c.Primary().Addr()
	cfg, err := failover.ParseConfig(c.ConnString("failover_max_duration=500ms"))
	if err != nil {
		t.Fatal(err)
	}
	var refuse atomic.Bool
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, a string) (net.Conn, error) {
		if refuse.Load() {
			return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		}
		return dial(ctx, network, a)
	}
	var pool atomic.Pointer[failover.Pool]
	seen := make(chan hosthealth.State, 1)
	cfg.ConnConfig.Tracer = connectEnd(func(err error) {
		if p := pool.Load(); p != nil && err != nil && refuse.Load() {
			for _, h := range p.Stat().Hosts() {
				if h.Addr == addr {
					select {
					case seen <- h.State:
					default:
					}
				}
			}
		}
	})
	p, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pool.Store(p)
	if n := hostStat(t, p, addr).Pool.TotalConns(); n != 0 {
		t.Fatalf("%d connections open before the first call, want none: the call must dial", n)
	}

	refuse.Store(true)
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := p.Exec(callCtx, "SELECT 1"); err == nil {
		t.Fatal("a call succeeded with every dial refused")
	}
	select {
	case st := <-seen:
		if st != hosthealth.TransportError {
			t.Fatalf("host %s was %v when its refused dial returned to pgxpool, want %v", addr, st, hosthealth.TransportError)
		}
	default:
		t.Fatal("no refused connect reached the tracer")
	}
}

// connectEnd is a pgx tracer that calls its func with the error of each
// connect pgx ends; it traces nothing else.
type connectEnd func(err error)

func (f connectEnd) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return ctx
}

func (f connectEnd) TraceConnectEnd(_ context.Context, data pgx.TraceConnectEndData) { f(data.Err) }

func (f connectEnd) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (f connectEnd) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
