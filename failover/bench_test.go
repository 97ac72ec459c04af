package failover_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/internal/cpubench"
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
// against the same local server (see cpubench; cpu-ratio is failover's CPU
// over pgxpool's):
//
//	go test -run '^$' -bench QueryRowCPU -count 10 ./failover/ > cpu.txt
//	benchstat -col /pool cpu.txt
func BenchmarkQueryRowCPU(b *testing.B) {
	ctx := context.Background()
	bare, pool := cpuPools(b)
	var v int
	cpubench.Compare(b, [2]cpubench.Side{
		{Name: "pool=pgxpool", Op: func() error { return bare.QueryRow(ctx, "SELECT 1").Scan(&v) }},
		{Name: "pool=failover", Op: func() error { return pool.QueryRow(ctx, "SELECT 1").Scan(&v) }},
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
	cpubench.Compare(b, [2]cpubench.Side{
		{Name: "pool=pgxpool", Op: func() error { _, err := bare.Exec(ctx, insert, 1); return err }},
		{Name: "pool=failover", Op: func() error { _, err := pool.Exec(ctx, insert, 1); return err }},
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
	cpubench.Compare(b, [2]cpubench.Side{
		{Name: "pool=pgxpool", Op: func() error { return bare.QueryRow(ctx, "SELECT 1").Scan(&v) }},
		{Name: "pool=reader", Op: func() error { return reader.QueryRow(ctx, "SELECT 1").Scan(&v) }},
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
	cpubench.Compare(b, [2]cpubench.Side{
		{Name: "pool=failover", Op: func() error { _, err := pool.Exec(ctx, insert, 1); return err }},
		{Name: "pool=causal", Op: func() error { _, err := pool.Exec(tokCtx, insert, 1); return err }},
	})
}
