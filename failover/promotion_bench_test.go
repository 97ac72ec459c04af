package failover_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// BenchmarkPromotionLatency measures how soon after a promotion one Pool
// writes on the new primary. Each drill runs four writers through a Pool
// over a primary and its replica, kills the primary (immediate shutdown),
// leaves the cluster without one for the outage (2s, or 100ms) while the
// writers wait, and promotes the replica with pg_promote(). A plain pgx
// connection to the replica, opened before the crash, tries a one-row
// insert every quarter of a millisecond from the moment pg_promote() is
// sent; the first insert it gets through is when the new primary accepts
// writes. Reported, medians over the drills:
//
//   - ms-after-writable: from that insert returning to the Pool's first
//     acknowledged write (negative when the Pool's write got through
//     first, which the plain connection's poll gap allows);
//   - ms-after-pg_promote: from pg_promote(wait => true) returning, which
//     checks for the end of recovery only every 100ms, so this one is
//     usually negative;
//   - ms-probe-saw: from the insert to the moment the Pool's Stat shows the
//     replica as the primary (its probe's news);
//   - ms-first-dial: how long the Pool's first new connection to the new
//     primary took to open (TCP, TLS, authentication, the role check);
//   - probes/s: the probes the Pool sent, to both hosts, during the
//     outage.
//
// The old primary then rejoins as a replica, and the next drill runs the
// other way round. It asserts nothing about time:
//
//	go test -run '^$' -bench PromotionLatency -benchtime 5x ./failover/
func BenchmarkPromotionLatency(b *testing.B) {
	for _, outage := range []time.Duration{2 * time.Second, 100 * time.Millisecond} {
		b.Run("outage="+outage.String(), func(b *testing.B) { promotionDrills(b, outage) })
	}
}

func promotionDrills(b *testing.B, outage time.Duration) {
	ctx := context.Background()
	c := pgtest.Start(b, pgtest.Options{Replicas: 1})
	cfg, err := failover.ParseConfig(c.ConnString("pool_max_conns=4"))
	if err != nil {
		b.Fatal(err)
	}
	dials := &dialClock{}
	cfg.ConnConfig.Tracer = dials
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
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
		for _, h := range pool.Stat().Hosts() {
			n += h.Probes
		}
		return n
	}

	var afterWritable, afterPromote, probeSaw, dialTook, probeRates []float64
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

		if err := old.Stop(ctx, pgtest.Immediate); err != nil {
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
		probeRates = append(probeRates, float64(probes()-before)/time.Since(crashed).Seconds())

		writable := make(chan writableAt, 1)
		go func() { writable <- pollWritable(ctx, poller) }()
		seen := make(chan time.Time, 1)
		go func() { seen <- watchPrimary(ctx, pool, next.Addr()) }()
		var promoted bool
		if err := admin.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&promoted); err != nil || !promoted {
			b.Fatalf("pg_promote: %v %v", promoted, err)
		}
		returned := time.Now()
		w := <-writable
		if w.err != nil {
			b.Fatal(w.err)
		}
		saw := <-seen
		waitFor("a write on the new primary", func() bool { return ackCount() > 0 })
		mu.Lock()
		first := slices.MinFunc(acks, time.Time.Compare)
		crashedAt = time.Time{}
		mu.Unlock()
		afterWritable = append(afterWritable, ms(first.Sub(w.at)))
		afterPromote = append(afterPromote, ms(first.Sub(returned)))
		probeSaw = append(probeSaw, ms(saw.Sub(w.at)))
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
		if err := c.Rejoin(ctx, old, next); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(median(afterWritable), "ms-after-writable")
	b.ReportMetric(median(afterPromote), "ms-after-pg_promote")
	b.ReportMetric(median(probeSaw), "ms-probe-saw")
	b.ReportMetric(median(dialTook), "ms-first-dial")
	b.ReportMetric(median(probeRates), "probes/s")
	b.Logf("outage %v, %d drills", outage, len(afterWritable))
	b.Logf("  from the new primary accepting writes to the Pool's first write (ms): %v", afterWritable)
	b.Logf("  from pg_promote() returning to the Pool's first write (ms): %v", afterPromote)
	b.Logf("  from the new primary accepting writes to the Pool's probe seeing it (ms): %v", probeSaw)
	b.Logf("  how long the Pool's first new connection to the new primary took to open (ms): %v", dialTook)
	b.Logf("  probes per second during the outage, both hosts: %v", probeRates)
}

// dialClock is a pgx ConnectTracer that keeps, per port, when the first
// connection the Pool opened there since reset began and when it was
// ready. The Pool's probes connect below pgx and are not seen.
type dialClock struct {
	mu    sync.Mutex // guards the fields below
	since time.Time
	ends  map[uint16][2]time.Time
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
	d.since, d.ends = since, map[uint16][2]time.Time{}
}

func (d *dialClock) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return context.WithValue(ctx, dialStartKey{}, time.Now())
}

func (d *dialClock) TraceConnectEnd(ctx context.Context, data pgx.TraceConnectEndData) {
	start, _ := ctx.Value(dialStartKey{}).(time.Time)
	if data.Err != nil || data.Conn == nil {
		return
	}
	end, port := time.Now(), data.Conn.Config().Port
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
	se, ok := d.ends[uint16(port)]
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
// until the insert gets through, and returns when it returned. A standby
// refuses it as a read-only transaction (25006); any other error ends the
// poll. The poll gap, not a busy loop: on two cores one would starve the
// Pool it measures.
func pollWritable(ctx context.Context, conn *pgx.Conn) writableAt {
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := conn.Exec(ctx, "INSERT INTO writable VALUES (now())", pgx.QueryExecModeSimpleProtocol)
		now := time.Now()
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return writableAt{at: now}
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
