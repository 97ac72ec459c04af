// Command demo is pgfailover's end-to-end demonstration. It starts a
// throwaway PostgreSQL cluster on loopback (one primary, two streaming
// replicas, synchronous replication), drives writes and reads through one
// failover.Pool, kills the primary and promotes a replica, and reports what
// the application saw.
//
//	go run ./examples/demo
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

// event is one line of the timeline.
type event struct {
	at   time.Duration
	what string
}

// tally counts the outcomes of one kind of call.
type tally struct {
	ok, failed atomic.Int64
}

type demo struct {
	start  time.Time
	pool   *failover.Pool
	writes tally
	reads  tally

	mu        sync.Mutex // guards the fields below
	events    []event
	acked     []int64
	unknown   []int64                  // writes whose outcome the pool reported as unknown
	firstErr  map[string]time.Duration // first error of each kind of failure
	promoted  time.Time
	firstGood time.Time // first acknowledged write after promotion
}

func (d *demo) since() time.Duration { return time.Since(d.start).Round(time.Millisecond) }

func (d *demo) note(format string, args ...any) {
	e := event{at: d.since(), what: fmt.Sprintf(format, args...)}
	d.mu.Lock()
	d.events = append(d.events, e)
	d.mu.Unlock()
	fmt.Printf("[%7v] %s\n", e.at, e.what)
}

func run(ctx context.Context) error {
	d := &demo{start: time.Now(), firstErr: map[string]time.Duration{}}
	fmt.Println("pgfailover demo: one primary, two replicas, one failover.Pool")

	cluster, err := pgtest.New(ctx, pgtest.Options{Replicas: 2, SyncReplication: true})
	if err != nil {
		return fmt.Errorf("starting the cluster: %w", err)
	}
	defer cluster.Close()
	nodes := cluster.Nodes()
	d.note("cluster up: primary %s, replicas %s and %s", nodes[0].Addr(), nodes[1].Addr(), nodes[2].Addr())

	dsn := cluster.ConnString("pool_max_conns=4&health_probe_interval=250ms")
	d.pool, err = failover.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer d.pool.Close()
	if _, err := d.pool.Exec(ctx, "CREATE TABLE orders (id bigint PRIMARY KEY, placed_at timestamptz DEFAULT now())"); err != nil {
		return err
	}
	d.note("failover.New connected; writes go to %s", nodes[0].Addr())

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var nextID atomic.Int64
	for range 2 {
		wg.Go(func() { d.writeLoop(ctx, stop, &nextID) })
		wg.Go(func() { d.readLoop(ctx, stop) })
	}
	progressDone := make(chan struct{})
	go func() { defer close(progressDone); d.progress(stop) }()

	halt := func() {
		close(stop)
		wg.Wait()
		<-progressDone
	}
	// A steady load for a while, so the timeline shows the normal rate.
	loadStart := time.Now()
	if err := waitFor(ctx, func() bool { return d.writes.ok.Load() >= 200 && time.Since(loadStart) > time.Second }); err != nil {
		halt()
		return fmt.Errorf("no steady load before the failover: %w", err)
	}

	d.note("killing the primary %s (immediate shutdown)", nodes[0].Addr())
	if err := nodes[0].Stop(ctx, pgtest.Immediate); err != nil {
		halt()
		return err
	}
	next, err := cluster.BestStandby(ctx)
	if err != nil {
		halt()
		return err
	}
	d.note("promoting %s, the replica with the most WAL", next.Addr())
	if err := cluster.Promote(ctx, next); err != nil {
		halt()
		return err
	}
	d.mu.Lock()
	d.promoted = time.Now()
	d.mu.Unlock()
	d.note("%s accepts writes; the other replica follows it", next.Addr())
	if err := cluster.FollowAll(ctx, next); err != nil {
		halt()
		return err
	}

	// Keep the load on until the new primary has taken a second's worth of
	// writes.
	okAtPromotion := d.writes.ok.Load()
	err = waitFor(ctx, func() bool {
		d.mu.Lock()
		first := d.firstGood
		d.mu.Unlock()
		return d.writes.ok.Load() >= okAtPromotion+200 && !first.IsZero() && time.Since(first) > time.Second
	})
	halt()
	if err != nil {
		return fmt.Errorf("writes did not resume on the new primary: %w", err)
	}
	d.note("load stopped")
	return d.report(ctx)
}

func (d *demo) writeLoop(ctx context.Context, stop <-chan struct{}, nextID *atomic.Int64) {
	for !stopped(stop) {
		id := nextID.Add(1)
		_, err := d.pool.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
		if err != nil {
			d.writes.failed.Add(1)
			d.failure("write", err)
			if errors.Is(err, failover.ErrCommitOutcomeUnknown) {
				d.mu.Lock()
				d.unknown = append(d.unknown, id)
				d.mu.Unlock()
			}
			continue
		}
		d.writes.ok.Add(1)
		d.mu.Lock()
		d.acked = append(d.acked, id)
		if !d.promoted.IsZero() && d.firstGood.IsZero() {
			d.firstGood = time.Now()
		}
		d.mu.Unlock()
	}
}

func (d *demo) readLoop(ctx context.Context, stop <-chan struct{}) {
	for !stopped(stop) {
		var n int64
		if err := d.pool.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&n); err != nil {
			d.reads.failed.Add(1)
			d.failure("read", err)
			continue
		}
		d.reads.ok.Add(1)
	}
}

// failure notes the first failure of each kind, so the timeline shows what
// the application saw without printing every error.
func (d *demo) failure(kind string, err error) {
	switch {
	case errors.Is(err, failover.ErrNoHost):
		kind += " failed: no primary yet"
	case errors.Is(err, failover.ErrBudgetExhausted):
		kind += " failed: failover budget exhausted"
	default:
		kind += " failed: " + err.Error()
	}
	d.mu.Lock()
	_, seen := d.firstErr[kind]
	if !seen {
		d.firstErr[kind] = d.since()
	}
	d.mu.Unlock()
	if !seen {
		d.note("first %s", kind)
	}
}

func (d *demo) progress(stop <-chan struct{}) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			fmt.Printf("[%7v]   writes ok=%d failed=%d   reads ok=%d failed=%d\n", d.since(),
				d.writes.ok.Load(), d.writes.failed.Load(), d.reads.ok.Load(), d.reads.failed.Load())
		}
	}
}

func (d *demo) report(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Println("\ntimeline")
	sort.SliceStable(d.events, func(i, j int) bool { return d.events[i].at < d.events[j].at })
	for _, e := range d.events {
		fmt.Printf("  %8v  %s\n", e.at, e.what)
	}

	// Every acknowledged write must be on the new primary exactly once.
	var stored, distinct int64
	if err := d.pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT id) FROM orders").Scan(&stored, &distinct); err != nil {
		return err
	}
	var missing int64
	if err := d.pool.QueryRow(ctx, "SELECT count(*) FROM unnest($1::bigint[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = a.id)", d.acked).Scan(&missing); err != nil {
		return err
	}

	var unknownCommitted int64
	if err := d.pool.QueryRow(ctx, "SELECT count(*) FROM orders WHERE id = ANY($1)", d.unknown).Scan(&unknownCommitted); err != nil {
		return err
	}

	fmt.Println("\nsummary")
	fmt.Printf("  writes: %d acknowledged, %d failed (%d reported as of unknown outcome, of which %d committed)\n",
		d.writes.ok.Load(), d.writes.failed.Load(), len(d.unknown), unknownCommitted)
	fmt.Printf("  reads:  %d answered, %d failed\n", d.reads.ok.Load(), d.reads.failed.Load())
	fmt.Printf("  promotion to first good write: %v\n", d.firstGood.Sub(d.promoted).Round(time.Millisecond))
	fmt.Printf("  rows on the new primary: %d (%d distinct); acknowledged writes missing: %d\n", stored, distinct, missing)
	for _, h := range d.pool.Stat().Hosts() {
		fmt.Printf("  host %-16s %-8s %s\n", h.Addr, h.Role, h.State)
	}
	if missing != 0 || stored != distinct || stored != int64(len(d.acked))+unknownCommitted {
		return fmt.Errorf("%d acknowledged writes missing, %d duplicated, %d rows unaccounted for",
			missing, stored-distinct, stored-int64(len(d.acked))-unknownCommitted)
	}
	return nil
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
