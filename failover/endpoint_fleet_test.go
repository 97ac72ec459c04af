package failover_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/internal/faultproxy"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// TestFleetBehindALaggingEndpoint: ten Pools with two writers each reach
// the cluster through one endpoint. After a switchover it leads to the
// old primary, back as a standby, for 3 s more, while every Pool's calls
// wait; then it moves to the new primary. The test reports what the
// Pools' fresh connections cost the standby meanwhile (connections
// through the endpoint, the standby's CPU) and how soon each Pool wrote
// again, beside a bare pgxpool through the same endpoint; it asserts only
// that every Pool writes again and that no write of theirs failed but
// those in flight at the switchover.
func TestFleetBehindALaggingEndpoint(t *testing.T) {
	skipUnderShort(t)
	const (
		fleetPools   = 10
		fleetWriters = 2
		lag          = 3 * time.Second
	)
	ctx := testContext(t)
	c := pgtest.Start(t, pgtest.Options{Replicas: 1, SyncReplication: true})
	old, next := c.Primary(), c.Replicas()[0]
	ep, err := faultproxy.New(old.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	dsn := strings.Replace(c.ConnStringFor([]*pgtest.Node{old}, ""), old.Addr(), ep.Addr(), 1)

	type fleetPool struct {
		mu   sync.Mutex // guards the fields below
		acks []time.Time
		errs []error
	}
	fleet := make([]*fleetPool, fleetPools)
	var loops []*loop
	for i := range fleet {
		pool := newPool(t, ctx, dsn)
		if i == 0 {
			if _, err := pool.Exec(ctx, "CREATE TABLE writes (id bigint)"); err != nil {
				t.Fatal(err)
			}
		}
		fp := &fleetPool{}
		fleet[i] = fp
		loops = append(loops, startLoop(t, fleetWriters, func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := pool.Exec(wctx, "INSERT INTO writes VALUES (1)")
			at := time.Now()
			fp.mu.Lock()
			defer fp.mu.Unlock()
			if err != nil {
				fp.errs = append(fp.errs, err)
				return
			}
			fp.acks = append(fp.acks, at)
		}))
	}
	defer func() {
		for _, l := range loops {
			l.stop()
		}
	}()
	ackedAfter := func(fp *fleetPool, t0 time.Time) (time.Time, bool) {
		fp.mu.Lock()
		defer fp.mu.Unlock()
		for _, at := range fp.acks {
			if at.After(t0) {
				return at, true
			}
		}
		return time.Time{}, false
	}
	// Beside them, a bare pgxpool through the same endpoint, whose
	// writers try again at once after an error, as writers on pgx alone
	// must to write as soon as they can.
	bare, err := pgxpool.New(ctx, dsn+"&pool_max_conns=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bare.Close)
	var bareMu sync.Mutex
	var bareAcks []time.Time
	bareErrs := 0
	loops = append(loops, startLoop(t, fleetWriters, func() {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := bare.Exec(wctx, "INSERT INTO writes VALUES (2)")
		at := time.Now()
		bareMu.Lock()
		defer bareMu.Unlock()
		if err != nil {
			bareErrs++
			return
		}
		bareAcks = append(bareAcks, at)
	}))
	began := time.Now()
	waitUntil(t, time.Minute, "writes through every Pool", func() bool {
		for _, fp := range fleet {
			if _, ok := ackedAfter(fp, began); !ok {
				return false
			}
		}
		return true
	})

	if err := c.Switchover(ctx, next); err != nil {
		t.Fatal(err)
	}
	// The endpoint still leads to the old primary, now a standby.
	cpu0, err := old.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	conns0, lagBegan := ep.Accepted(), time.Now()
	pause(t, ctx, lag)
	cpu1, err := old.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	conns, window := ep.Accepted()-conns0, time.Since(lagBegan)
	ep.SetUpstream(next.Addr())
	moved := time.Now()
	waitUntil(t, 30*time.Second, "a write through every Pool after the endpoint moved", func() bool {
		for _, fp := range fleet {
			if _, ok := ackedAfter(fp, moved); !ok {
				return false
			}
		}
		return true
	})

	var firsts []time.Duration
	for i, fp := range fleet {
		at, _ := ackedAfter(fp, moved)
		firsts = append(firsts, at.Sub(moved))
		fp.mu.Lock()
		for _, err := range fp.errs {
			if !errors.Is(err, failover.ErrCommitOutcomeUnknown) {
				t.Errorf("pool %d: a write failed with %v", i, err)
			}
		}
		if len(fp.errs) > fleetWriters {
			t.Errorf("pool %d: %d writes failed; at most its %d writers' in flight may", i, len(fp.errs), fleetWriters)
		}
		fp.mu.Unlock()
	}
	slices.Sort(firsts)
	// pgxpool's writes, for as long as the Pools took and 5 s more.
	deadline := time.Now().Add(5 * time.Second)
	bareFirst := "none"
	for bareFirst == "none" && time.Now().Before(deadline) {
		bareMu.Lock()
		for _, at := range bareAcks {
			if at.After(moved) {
				bareFirst = at.Sub(moved).Round(time.Millisecond).String()
				break
			}
		}
		bareMu.Unlock()
		if bareFirst == "none" {
			time.Sleep(10 * time.Millisecond)
		}
	}
	bareMu.Lock()
	t.Logf("  a bare pgxpool through the same endpoint: first write after the move %s (looked for %v), %d writes failed in all",
		bareFirst, time.Since(moved).Round(time.Second), bareErrs)
	bareMu.Unlock()
	secs := window.Seconds()
	cpu := cpu1 - cpu0
	t.Logf("%d Pools x %d writers behind an endpoint leading to a standby for %v:", fleetPools, fleetWriters, window.Round(time.Millisecond))
	t.Logf("  connections through the endpoint: %d, %.1f/s per Pool", conns, float64(conns)/secs/fleetPools)
	t.Logf("  standby CPU, every server process (10 ms ticks): %v, %.1f ms/s per Pool, %.1f ms per connection",
		cpu, ms(cpu)/secs/fleetPools, ms(cpu)/float64(max(conns, 1)))
	t.Logf("  endpoint moved to first write: median %v, min %v, max %v",
		firsts[len(firsts)/2].Round(time.Millisecond), firsts[0].Round(time.Millisecond), firsts[len(firsts)-1].Round(time.Millisecond))
}
