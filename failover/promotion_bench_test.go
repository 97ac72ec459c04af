package failover_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
)

// BenchmarkPromotionLatency measures how soon after a promotion one pool
// writes on the new primary, for a failover.Pool (pool=pgfailover) and,
// beside it, for a bare pgxpool over the same multi-host string with
// target_session_attrs=read-write (pool=pgxpool), whose writers try again
// at once after an error, as an application on pgx alone has to. Each
// drill runs four writers through the pool over a primary and its
// replica, kills the primary (immediate shutdown), leaves the cluster
// without one for the outage (2s, or 100ms) while the writers wait or
// retry, and promotes the replica with pg_promote(). A plain pgx
// connection to the replica, opened before the crash, tries a one-row
// insert every quarter of a millisecond from the moment pg_promote() is
// sent; when the first insert it gets through was sent is when the new
// primary accepts writes, give or take the poll gap (see pollWritable).
// Reported, medians over the drills:
//
//   - ms-after-writable: from then to the pool's first acknowledged write;
//   - ms-after-pg_promote: from pg_promote(wait => true) returning, which
//     checks for the end of recovery only every 100ms, so that this one is
//     often smaller, or negative;
//   - ms-probe-saw (pgfailover): from the new primary accepting writes to
//     the moment the Pool's Stat shows it as the primary (its probe's
//     news);
//   - ms-first-dial: how long the pool's first new connection to the new
//     primary took to open (TCP, authentication, the role check);
//   - dials/s-dead, dials/s-replica: TCP connections opened per second of
//     the outage to the dead primary and to the replica, counted by the
//     pools' DialFunc, which the Pool's probes and pgconn's cancel
//     requests go through too;
//   - probes/s (pgfailover): the probes the Pool sent, to both hosts,
//     during the outage.
//
// The old primary then rejoins as a replica, and the next drill runs the
// other way round. It asserts nothing about time:
//
//	go test -run '^$' -bench PromotionLatency -benchtime 5x ./failover/
func BenchmarkPromotionLatency(b *testing.B) {
	for _, kind := range []string{"pgfailover", "pgxpool"} {
		for _, outage := range []time.Duration{2 * time.Second, 100 * time.Millisecond} {
			b.Run("pool="+kind+"/outage="+outage.String(), func(b *testing.B) { promotionDrills(b, kind, outage) })
		}
	}
}

// writePool is what a drill needs of a pool: a failover.Pool or a
// pgxpool.Pool.
type writePool interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Close()
}

func promotionDrills(b *testing.B, kind string, outage time.Duration) {
	ctx := context.Background()
	c := failovertest.Start(b)
	dials := &dialClock{}
	var pool writePool
	var fpool *failover.Pool // nil for pgxpool
	switch kind {
	case "pgfailover":
		cfg, err := failover.ParseConfig(c.ConnString("pool_max_conns=4"))
		if err != nil {
			b.Fatal(err)
		}
		cfg.ConnConfig.Tracer = dials
		cfg.ConnConfig.DialFunc = dials.counting(cfg.ConnConfig.DialFunc)
		if fpool, err = failover.NewWithConfig(ctx, cfg); err != nil {
			b.Fatal(err)
		}
		pool = fpool
	case "pgxpool":
		cfg, err := pgxpool.ParseConfig(c.ConnString("pool_max_conns=4&target_session_attrs=read-write"))
		if err != nil {
			b.Fatal(err)
		}
		cfg.ConnConfig.Tracer = dials
		cfg.ConnConfig.DialFunc = dials.counting(cfg.ConnConfig.DialFunc)
		if pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
			b.Fatal(err)
		}
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE writes (id bigint); CREATE TABLE writable (at timestamptz)"); err != nil {
		b.Fatal(err)
	}

	var (
		mu        sync.Mutex // guards acks and crashedAt
		acks      []time.Time
		crashedAt time.Time // zero outside a drill
		stop      = make(chan struct{})
		wg        sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := pool.Exec(ctx, "INSERT INTO writes VALUES (1)")
				now := time.Now()
				mu.Lock()
				if err == nil && (crashedAt.IsZero() || now.After(crashedAt)) {
					acks = append(acks, now)
				}
				mu.Unlock()
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	ackCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acks) }
	waitFor := func(what string, cond func() bool) {
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				b.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	probes := func() (n int64) {
		if fpool != nil {
			for _, h := range fpool.Stat().Hosts() {
				n += h.Probes
			}
		}
		return n
	}

	var afterWritable, afterPromote, probeSaw, dialTook, deadRates, replicaRates, probeRates []float64
	for b.Loop() {
		waitFor("writes before the drill", func() bool { return ackCount() > 0 })
		old, next := c.Primary(), c.Replicas()[0]
		poller, err := next.Connect(ctx)
		if err != nil {
			b.Fatal(err)
		}
		admin, err := next.Connect(ctx)
		if err != nil {
			b.Fatal(err)
		}

		if err := old.Crash(ctx); err != nil {
			b.Fatal(err)
		}
		crashed := time.Now()
		dials.reset(crashed)
		mu.Lock()
		acks, crashedAt = acks[:0], crashed
		mu.Unlock()
		before := probes()
		for time.Since(crashed) < outage {
			time.Sleep(time.Millisecond) // the drill: no primary for the outage
		}
		secs := time.Since(crashed).Seconds()
		probeRates = append(probeRates, float64(probes()-before)/secs)
		deadRates = append(deadRates, float64(dials.attempts(old.Port()))/secs)
		replicaRates = append(replicaRates, float64(dials.attempts(next.Port()))/secs)

		writable := make(chan writableAt, 1)
		go func() { writable <- pollWritable(ctx, poller) }()
		seen := make(chan time.Time, 1)
		if fpool != nil {
			go func() { seen <- watchPrimary(ctx, fpool, next.Addr()) }()
		}
		var promoted bool
		if err := admin.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&promoted); err != nil || !promoted {
			b.Fatalf("pg_promote: %v %v", promoted, err)
		}
		returned := time.Now()
		w := <-writable
		if w.err != nil {
			b.Fatal(w.err)
		}
		waitFor("a write on the new primary", func() bool { return ackCount() > 0 })
		mu.Lock()
		first := slices.MinFunc(acks, time.Time.Compare)
		crashedAt = time.Time{}
		mu.Unlock()
		afterWritable = append(afterWritable, ms(first.Sub(w.at)))
		afterPromote = append(afterPromote, ms(first.Sub(returned)))
		if fpool != nil {
			probeSaw = append(probeSaw, ms((<-seen).Sub(w.at)))
		}
		if start, end, ok := dials.first(next.Port()); ok {
			dialTook = append(dialTook, ms(end.Sub(start)))
		}

		b.StopTimer()
		poller.Close(ctx)
		admin.Close(ctx)
		// pg_rewind reads the timeline from the control file, which names
		// the new one only after a checkpoint (see pgtest's Promote).
		if err := next.Exec(ctx, "CHECKPOINT"); err != nil {
			b.Fatal(err)
		}
		if err := c.Promote(ctx, next); err != nil {
			b.Fatal(err)
		}
		if err := c.Rejoin(ctx, old); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(median(afterWritable), "ms-after-writable")
	b.ReportMetric(median(afterPromote), "ms-after-pg_promote")
	b.ReportMetric(median(dialTook), "ms-first-dial")
	b.ReportMetric(median(deadRates), "dials/s-dead")
	b.ReportMetric(median(replicaRates), "dials/s-replica")
	if fpool != nil {
		b.ReportMetric(median(probeSaw), "ms-probe-saw")
		b.ReportMetric(median(probeRates), "probes/s")
	}
	b.Logf("%s, outage %v, %d drills", kind, outage, len(afterWritable))
	b.Logf("  from the new primary accepting writes to the pool's first write (ms): %v", afterWritable)
	b.Logf("  from pg_promote() returning to the pool's first write (ms): %v", afterPromote)
	b.Logf("  how long the pool's first new connection to the new primary took to open (ms): %v", dialTook)
	b.Logf("  connection attempts per second of the outage, to the dead primary: %v; to the replica: %v", deadRates, replicaRates)
	if fpool != nil {
		b.Logf("  from the new primary accepting writes to the Pool's probe seeing it (ms): %v", probeSaw)
		b.Logf("  probes per second during the outage, both hosts: %v", probeRates)
	}
}

// dialClock is a pgx ConnectTracer that keeps, per port, when the first
// connection the pool opened there since reset began and when it was
// ready (the Pool's probes connect below pgx and are not seen), and, in
// front of a DialFunc, counts every TCP connection opened, by port.
type dialClock struct {
	mu    sync.Mutex // guards the fields below
	since time.Time
	ends  map[int][2]time.Time
	tries map[int]int // TCP connections opened since reset, by port (see counting)
}

// counting returns dial, counting each connection it is asked to open.
func (d *dialClock) counting(dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if _, p, err := net.SplitHostPort(addr); err == nil {
			port, _ := strconv.Atoi(p)
			d.mu.Lock()
			if d.tries != nil {
				d.tries[port]++
			}
			d.mu.Unlock()
		}
		return dial(ctx, network, addr)
	}
}

// attempts returns the TCP connections opened to port since reset.
func (d *dialClock) attempts(port int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.tries[port]
}

type dialStartKey struct{}

// TraceQueryStart and TraceQueryEnd make it a pgx.QueryTracer, which is
// what ConnConfig.Tracer takes; they do nothing.
func (d *dialClock) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (d *dialClock) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (d *dialClock) reset(since time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.since, d.ends, d.tries = since, map[int][2]time.Time{}, map[int]int{}
}

func (d *dialClock) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return context.WithValue(ctx, dialStartKey{}, time.Now())
}

func (d *dialClock) TraceConnectEnd(ctx context.Context, data pgx.TraceConnectEndData) {
	start, _ := ctx.Value(dialStartKey{}).(time.Time)
	if data.Err != nil || data.Conn == nil {
		return
	}
	end := time.Now()
	// The server it reached: with several hosts in the string, pgx's
	// config names the first.
	addr, ok := data.Conn.PgConn().Conn().RemoteAddr().(*net.TCPAddr)
	if !ok {
		return
	}
	port := addr.Port
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, seen := d.ends[port]; !seen && d.ends != nil && start.After(d.since) {
		d.ends[port] = [2]time.Time{start, end}
	}
}

// first returns when the first connection to port since reset began and
// was ready.
func (d *dialClock) first(port int) (start, end time.Time, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	se, ok := d.ends[port]
	return se[0], se[1], ok
}

// writableAt is when a server first took a write, or why it could not be
// told.
type writableAt struct {
	at  time.Time
	err error
}

// pollWritable inserts a row into the table "writable" on conn, a plain
// connection to a standby being promoted, every quarter of a millisecond
// until the insert gets through, and returns when that insert was sent:
// the server turned writable between the refusal before it and then. (Its
// return comes a commit later, and the Pool's first write pays for a
// commit of its own.) A standby refuses the insert as a read-only
// transaction (25006); any other error ends the poll. The poll gap, not a
// busy loop: on two cores one would starve the Pool it measures.
func pollWritable(ctx context.Context, conn *pgx.Conn) writableAt {
	deadline := time.Now().Add(time.Minute)
	for {
		sent := time.Now()
		_, err := conn.Exec(ctx, "INSERT INTO writable VALUES (now())", pgx.QueryExecModeSimpleProtocol)
		now := time.Now()
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return writableAt{at: sent}
		case !errors.As(err, &pgErr) || pgErr.Code != "25006":
			return writableAt{err: fmt.Errorf("polling for the end of recovery: %w", err)}
		case now.After(deadline):
			return writableAt{err: errors.New("the standby took no write within a minute of pg_promote")}
		}
		time.Sleep(250 * time.Microsecond)
	}
}

// watchPrimary returns when the Pool's Stat first shows the host at addr
// as the primary, polling every millisecond for up to a minute.
func watchPrimary(ctx context.Context, pool *failover.Pool, addr string) time.Time {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(time.Millisecond) {
		for _, h := range pool.Stat().Hosts() {
			if h.Addr == addr && h.Role == hosthealth.RolePrimary {
				return time.Now()
			}
		}
	}
	return time.Time{}
}

// median returns the middle value of v (the upper one of an even count).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}
