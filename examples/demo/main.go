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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
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

	ledger failovertest.Ledger[int64] // what each write returned

	mu        sync.Mutex // guards the fields below
	events    []event
	firstErr  map[string]time.Duration // first error of each kind of failure
	killed    time.Time                // when the primary was gone
	writable  time.Time                // when the first write the new primary took was sent to it
	acking    time.Time                // when the new primary acknowledged that write
	seen      time.Time                // when the Pool's Stat first showed it as the primary
	firstGood time.Time                // the first write acknowledged after the kill
}

func (d *demo) since() time.Duration { return time.Since(d.start).Round(time.Millisecond) }

func (d *demo) note(format string, args ...any) {
	d.noteAt(time.Now(), format, args...)
}

// noteAt notes what happened at t, which may lie in the past.
func (d *demo) noteAt(t time.Time, format string, args ...any) {
	e := event{at: t.Sub(d.start).Round(time.Millisecond), what: fmt.Sprintf(format, args...)}
	d.mu.Lock()
	d.events = append(d.events, e)
	d.mu.Unlock()
	fmt.Printf("[%7v] %s\n", e.at, e.what)
}

func run(ctx context.Context) error {
	d := &demo{start: time.Now(), firstErr: map[string]time.Duration{}}
	fmt.Println("pgfailover demo: one primary, two replicas, one failover.Pool")

	cluster, err := failovertest.New(ctx, failovertest.Replicas(2), failovertest.SyncReplication())
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
	if _, err := d.pool.Exec(ctx, "CREATE TABLE orders (id bigint PRIMARY KEY, placed_at timestamptz DEFAULT now());"+
		"CREATE TABLE writable (at timestamptz)"); err != nil {
		return err
	}
	// One plain connection to each replica, opened now, tells when the one
	// promoted takes its first write: the moment the promotion is timed
	// from.
	watchers := map[*failovertest.Node]*pgx.Conn{}
	defer func() {
		for _, c := range watchers {
			c.Close(context.Background())
		}
	}()
	for _, n := range nodes[1:] {
		c, err := pgx.Connect(ctx, n.ConnString(""))
		if err != nil {
			return err
		}
		watchers[n] = c
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
	if _, err := cluster.CrashPrimary(ctx); err != nil {
		halt()
		return err
	}
	d.mu.Lock()
	d.killed = time.Now()
	d.mu.Unlock()
	next, err := cluster.BestStandby(ctx)
	if err != nil {
		halt()
		return err
	}
	d.note("promoting %s, the replica with the most WAL", next.Addr())
	writable := make(chan error, 1)
	go func() {
		sent, acked, err := firstWrite(ctx, watchers[next])
		d.mu.Lock()
		d.writable, d.acking = sent, acked
		d.mu.Unlock()
		writable <- err
	}()
	seen := make(chan time.Time, 1)
	go func() { seen <- d.primarySeen(ctx, next.Addr()) }()
	if err := cluster.Promote(ctx, next); err != nil {
		halt()
		return err
	}
	d.note("the promote call returned; the other replica follows %s now", next.Addr())
	// Replication is synchronous: the new primary acknowledges its first
	// write once the other replica streams from it.
	if err := <-writable; err != nil {
		halt()
		return err
	}
	d.noteAt(d.writable, "%s takes writes (a plain connection's first insert there)", next.Addr())
	d.mu.Lock()
	d.seen = <-seen
	d.mu.Unlock()
	d.noteAt(d.seen, "the Pool's probe sees %s as the primary", next.Addr())
	d.noteAt(d.acking, "%s acknowledges that insert", next.Addr())

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
		d.ledger.Record(id, err)
		if err != nil {
			d.writes.failed.Add(1)
			d.failure("write", err)
			continue
		}
		d.writes.ok.Add(1)
		now := time.Now()
		d.mu.Lock()
		// With the old primary gone, an acknowledged write is on the new one.
		if !d.killed.IsZero() && now.After(d.killed) && d.firstGood.IsZero() {
			d.firstGood = now
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

	// Every acknowledged write must be on the new primary exactly once,
	// and every row must come from a write that was acknowledged or of
	// unknown outcome.
	verdict, err := d.ledger.Check(ctx, d.pool, "orders", "id")
	if err != nil && !errors.Is(err, failovertest.ErrMismatch) {
		return err
	}

	fmt.Println("\nsummary")
	fmt.Printf("  writes: %d acknowledged, %d failed (%d reported as of unknown outcome, of which %d committed)\n",
		d.writes.ok.Load(), d.writes.failed.Load(), d.ledger.Count(failovertest.Unknown), verdict.UnknownCommitted)
	fmt.Printf("  reads:  %d answered, %d failed\n", d.reads.ok.Load(), d.reads.failed.Load())
	fmt.Printf("  promotion: the new primary took writes %v after the kill and acknowledged the first %v later (synchronous replication)\n",
		d.writable.Sub(d.killed).Round(time.Millisecond), d.acking.Sub(d.writable).Round(time.Millisecond))
	fmt.Printf("  the Pool's probe saw the new primary %v after it took writes\n", d.seen.Sub(d.writable).Round(time.Millisecond))
	fmt.Printf("  promotion to first good write: %v (from that first acknowledgement)\n",
		d.firstGood.Sub(d.acking).Round(time.Millisecond))
	fmt.Printf("  the ledger of writes against the new primary: %v\n", verdict)
	for _, h := range d.pool.Stat().Hosts() {
		fmt.Printf("  host %-16s %-8s %s\n", h.Addr, h.Role, h.State)
	}
	if err != nil {
		return err
	}
	if verdict.Unrecorded != 0 {
		return fmt.Errorf("%d rows on the new primary come from no write of the demo", verdict.Unrecorded)
	}
	return nil
}

// firstWrite inserts a row into the table "writable" through conn, a plain
// connection to a replica being promoted, every quarter of a millisecond
// until the insert gets through. It returns when that insert was sent (the
// server had left recovery) and when it was acknowledged: the first moment
// any client could have a write acknowledged by the new primary, whose
// commits wait for a synchronous standby, as every write does. A replica
// refuses the insert as a read-only transaction (25006).
func firstWrite(ctx context.Context, conn *pgx.Conn) (sent, acked time.Time, err error) {
	for {
		sent := time.Now()
		_, err := conn.Exec(ctx, "INSERT INTO writable VALUES (now())", pgx.QueryExecModeSimpleProtocol)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return sent, time.Now(), nil
		case !errors.As(err, &pgErr) || pgErr.Code != "25006":
			return time.Time{}, time.Time{}, fmt.Errorf("waiting for the promoted replica to take a write: %w", err)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, time.Time{}, ctx.Err()
		case <-time.After(250 * time.Microsecond):
		}
	}
}

// primarySeen returns when the Pool's Stat first shows the host at addr as
// the primary, asking every millisecond until ctx ends.
func (d *demo) primarySeen(ctx context.Context, addr string) time.Time {
	for ctx.Err() == nil {
		for _, h := range d.pool.Stat().Hosts() {
			if h.Addr == addr && h.Role == hosthealth.RolePrimary {
				return time.Now()
			}
		}
		time.Sleep(time.Millisecond)
	}
	return time.Time{}
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
