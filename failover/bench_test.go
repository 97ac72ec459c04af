package failover_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// queryRowRuns counts the runs of BenchmarkQueryRow, so that each run
// swaps which pool goes first and neither gains from the order.
var queryRowRuns int

// BenchmarkQueryRow runs QueryRow("SELECT 1") through bare pgxpool and
// through failover.Pool against the same local server in one run, so that
// benchstat can compare them:
//
//	go test -run '^$' -bench QueryRow -count 20 ./failover/ > bench.txt
//	benchstat -col /pool bench.txt
func BenchmarkQueryRow(b *testing.B) {
	ctx := context.Background()
	c := pgtest.Start(b, pgtest.Options{})
	dsn := c.Primary().ConnString("pool_max_conns=4")

	bare, err := pgxpool.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer bare.Close()
	pool, err := failover.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()

	type queryRower interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}
	bench := func(name string, q queryRower) func() {
		return func() {
			b.Run("pool="+name, func(b *testing.B) {
				var n int
				// Connect outside the timed loop.
				if err := q.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := q.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	first, second := bench("pgxpool", bare), bench("failover", pool)
	if queryRowRuns%2 == 1 {
		first, second = second, first
	}
	queryRowRuns++
	first()
	second()
}

// cpuRuns counts the runs of each CPU benchmark, to swap the order of its
// sub-benchmarks from one run to the next.
var cpuRuns = map[string]int{}

// cpuRound is how many operations one side runs before the other takes over.
const cpuRound = 50

// cpuTime returns the CPU time, user and system, this process has used so
// far. The server runs in other processes, so this is the client's share.
func cpuTime(b *testing.B) (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// cpuSide is one side of a CPU comparison: a name and one operation.
type cpuSide struct {
	name string
	op   func() error
}

// benchCPU compares the client's CPU time per operation of a base side
// (sides[0]) and another (sides[1]) in a sub-benchmark "pool=<name>" for
// each. Wall time on a small shared machine is mostly waiting for the
// server and cannot resolve a few percent; CPU time can, but it drifts with
// the load other processes put on the machine. So each sub-benchmark runs
// its side in rounds of cpuRound operations and, between rounds, with the
// timer stopped, a round of the other side, measuring both. It reports its
// own side's cpu-ns/op (user+sys), user-ns/op and sys-ns/op beside the
// usual metrics (ns/op, B/op and allocs/op are its own side's alone), and
// cpu-ratio: the CPU time of sides[1] over that of sides[0] in those same
// interleaved rounds, which the drift mostly cancels out of. Both
// sub-benchmarks report that ratio, each from its own rounds. The order of
// the sub-benchmarks alternates between runs.
func benchCPU(b *testing.B, sides [2]cpuSide) {
	run := func(b *testing.B, op func() error, n int) time.Duration {
		u0, s0 := cpuTime(b)
		for range n {
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
		u1, s1 := cpuTime(b)
		return u1 - u0 + s1 - s0
	}
	bench := func(me, other int) func() {
		return func() {
			b.Run("pool="+sides[me].name, func(b *testing.B) {
				// Connect and warm both sides outside the measurement.
				run(b, sides[me].op, cpuRound)
				run(b, sides[other].op, cpuRound)
				b.ReportAllocs()
				var user, sys time.Duration
				var cpu [2]time.Duration
				b.ResetTimer()
				for done := 0; done < b.N; {
					n := min(cpuRound, b.N-done)
					u0, s0 := cpuTime(b)
					for range n {
						if err := sides[me].op(); err != nil {
							b.Fatal(err)
						}
					}
					u1, s1 := cpuTime(b)
					user += u1 - u0
					sys += s1 - s0
					cpu[me] += u1 - u0 + s1 - s0
					done += n
					b.StopTimer()
					cpu[other] += run(b, sides[other].op, n)
					b.StartTimer()
				}
				b.StopTimer()
				b.ReportMetric(float64(user+sys)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(float64(user)/float64(b.N), "user-ns/op")
				b.ReportMetric(float64(sys)/float64(b.N), "sys-ns/op")
				b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "cpu-ratio")
			})
		}
	}
	first, second := bench(0, 1), bench(1, 0)
	if cpuRuns[b.Name()]%2 == 1 {
		first, second = second, first
	}
	cpuRuns[b.Name()]++
	first()
	second()
}

// cpuPools starts a server and returns a bare pgxpool and a failover.Pool
// on it, with the same connection string.
func cpuPools(b *testing.B) (*pgxpool.Pool, *failover.Pool) {
	ctx := context.Background()
	c := pgtest.Start(b, pgtest.Options{})
	dsn := c.Primary().ConnString("pool_max_conns=4")
	bare, err := pgxpool.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(bare.Close)
	pool, err := failover.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return bare, pool
}

// BenchmarkQueryRowCPU measures the client's CPU time per
// QueryRow("SELECT 1").Scan through bare pgxpool and through failover.Pool
// against the same local server (see benchCPU; cpu-ratio is failover's CPU
// over pgxpool's):
//
//	go test -run '^$' -bench QueryRowCPU -count 10 ./failover/ > cpu.txt
//	benchstat -col /pool cpu.txt
func BenchmarkQueryRowCPU(b *testing.B) {
	ctx := context.Background()
	bare, pool := cpuPools(b)
	var v int
	benchCPU(b, [2]cpuSide{
		{"pgxpool", func() error { return bare.QueryRow(ctx, "SELECT 1").Scan(&v) }},
		{"failover", func() error { return pool.QueryRow(ctx, "SELECT 1").Scan(&v) }},
	})
}

// BenchmarkExecCPU is BenchmarkQueryRowCPU for Exec of a one-row INSERT,
// the path that classifies its SQL and notes the write on success.
func BenchmarkExecCPU(b *testing.B) {
	ctx := context.Background()
	bare, pool := cpuPools(b)
	if _, err := bare.Exec(ctx, "CREATE UNLOGGED TABLE bench_exec (v int)"); err != nil {
		b.Fatal(err)
	}
	const insert = "INSERT INTO bench_exec (v) VALUES ($1)"
	benchCPU(b, [2]cpuSide{
		{"pgxpool", func() error { _, err := bare.Exec(ctx, insert, 1); return err }},
		{"failover", func() error { _, err := pool.Exec(ctx, insert, 1); return err }},
	})
}

// BenchmarkReaderQueryRowCPU is BenchmarkQueryRowCPU for reads on a
// replica: bare pgxpool connected to the replica beside the Pool's Reader,
// which routes to that same replica.
//
//	go test -run '^$' -bench ReaderQueryRowCPU -count 10 ./failover/ > cpu.txt
//	benchstat -col /pool cpu.txt
func BenchmarkReaderQueryRowCPU(b *testing.B) {
	ctx := context.Background()
	c := pgtest.Start(b, pgtest.Options{Replicas: 1})
	bare, err := pgxpool.New(ctx, c.Replicas()[0].ConnString("pool_max_conns=4"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(bare.Close)
	pool, err := failover.New(ctx, c.ConnString("pool_max_conns=4"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	var port int
	if err := pool.Reader().QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port); err != nil || port != c.Replicas()[0].Port() {
		b.Fatalf("the Reader reads from %d (%v), not the replica", port, err)
	}
	reader := pool.Reader()
	var v int
	benchCPU(b, [2]cpuSide{
		{"pgxpool", func() error { return bare.QueryRow(ctx, "SELECT 1").Scan(&v) }},
		{"reader", func() error { return reader.QueryRow(ctx, "SELECT 1").Scan(&v) }},
	})
}

// BenchmarkCausalExec measures what recording a write's WAL position for
// a CausalToken costs: Exec of a one-row INSERT through the Pool without
// and with a token.
//
//	go test -run '^$' -bench CausalExec -count 10 ./failover/ > causal.txt
//	benchstat -col /pool causal.txt
func BenchmarkCausalExec(b *testing.B) {
	ctx := context.Background()
	bare, pool := cpuPools(b)
	if _, err := bare.Exec(ctx, "CREATE UNLOGGED TABLE bench_causal (v int)"); err != nil {
		b.Fatal(err)
	}
	const insert = "INSERT INTO bench_causal (v) VALUES ($1)"
	tokCtx := failover.WithCausalToken(ctx, new(failover.CausalToken))
	benchCPU(b, [2]cpuSide{
		{"failover", func() error { _, err := pool.Exec(ctx, insert, 1); return err }},
		{"causal", func() error { _, err := pool.Exec(tokCtx, insert, 1); return err }},
	})
}
