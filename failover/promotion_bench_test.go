package failover_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// BenchmarkPromotionLatency measures how soon after a promotion the Pool
// writes on the new primary. Each drill kills the primary, leaves the
// cluster without one for 2 s while writers wait, promotes the replica
// with pg_promote(), and takes the time from pg_promote() returning to the
// first acknowledged write (ms/promotion). That figure is negative when the
// first write landed before pg_promote() returned, as it usually does:
// pg_promote(wait => true) checks for the end of recovery only every
// 100 ms. So it also reports the time from the moment a second session,
// asking pg_is_in_recovery() every millisecond, saw the server leave recovery
// (ms-after-writable), and the probes sent while the writers waited. The
// old primary then rejoins as a replica for the next drill. Medians over
// the drills:
//
//	go test -run '^$' -bench PromotionLatency -benchtime 5x ./failover/
func BenchmarkPromotionLatency(b *testing.B) {
	ctx := context.Background()
	c := pgtest.Start(b, pgtest.Options{Replicas: 1})
	pool, err := failover.New(ctx, c.ConnString("pool_max_conns=4"))
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE writes (id bigint)"); err != nil {
		b.Fatal(err)
	}

	var (
		mu     sync.Mutex // guards acks
		acks   []time.Time
		stop   = make(chan struct{})
		wg     sync.WaitGroup
		writes int64
	)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				writes++
				id := writes
				mu.Unlock()
				if _, err := pool.Exec(ctx, "INSERT INTO writes VALUES ($1)", id); err == nil {
					now := time.Now()
					mu.Lock()
					acks = append(acks, now)
					mu.Unlock()
				}
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
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var latencies, sinceWritable, probeRates []float64
	for b.Loop() {
		waitFor("writes before the drill", func() bool { return ackCount() > 0 })
		old := c.Primary()
		next := c.Replicas()[0]
		if err := old.Stop(ctx, pgtest.Fast); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		acks = acks[:0]
		mu.Unlock()
		before := probes()
		time.Sleep(2 * time.Second) // the drill: no primary for 2 s
		probeRates = append(probeRates, float64(probes()-before)/2)

		// One session promotes; another asks pg_is_in_recovery() every
		// millisecond, to see when the server really starts taking writes.
		poller, err := next.Connect(ctx)
		if err != nil {
			b.Fatal(err)
		}
		writable := make(chan time.Time, 1)
		go func() {
			defer poller.Close(ctx)
			for {
				var inRecovery bool
				if err := poller.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil || !inRecovery {
					writable <- time.Now()
					return
				}
				// Not a busy loop: on two cores it would starve the
				// writers it measures.
				time.Sleep(time.Millisecond)
			}
		}()
		conn, err := next.Connect(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var promoted bool
		if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&promoted); err != nil || !promoted {
			b.Fatalf("pg_promote: %v %v", promoted, err)
		}
		returned := time.Now()
		conn.Close(ctx)
		seen := <-writable
		waitFor("a write on the new primary", func() bool { return ackCount() > 0 })
		mu.Lock()
		first := slices.MinFunc(acks, func(a, b time.Time) int { return a.Compare(b) })
		mu.Unlock()
		latencies = append(latencies, ms(first.Sub(returned)))
		sinceWritable = append(sinceWritable, ms(first.Sub(seen)))

		b.StopTimer()
		if err := c.Promote(ctx, next); err != nil {
			b.Fatal(err)
		}
		if err := c.Rejoin(ctx, old, next); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	median := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(median(latencies), "ms/promotion")
	b.ReportMetric(median(sinceWritable), "ms-after-writable")
	b.ReportMetric(median(probeRates), "probes/s")
	b.Logf("from pg_promote() returning to the first write (ms): %v", latencies)
	b.Logf("from a polling client seeing the server writable to the first write (ms): %v", sinceWritable)
	b.Logf("probes per second while the writers waited, all hosts: %v", probeRates)
}
