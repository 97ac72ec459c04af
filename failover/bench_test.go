package failover_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/internal/cpubench"
	"github.com/pgfailover/pgfailover/internal/netconn"
)

// The happy-path benchmarks run one operation through bare pgxpool and
// through failover.Pool against the same local server in one run, and
// report each side's client CPU per operation and their ratio (see
// cpubench; cpu-ratio is failover's CPU over pgxpool's) beside wall time
// and allocations. Each runs serially (goroutines=1) and on parallelism
// goroutines at once (goroutines=8), as b.RunParallel would:
//
//	go test -run '^$' -bench 'CPU' -count 10 ./failover/ > cpu.txt
//	benchstat -col /pool cpu.txt

// parallelism is how many goroutines the parallel rows run: twice the
// pool's connections (pool_max_conns=4), so that callers also wait for
// connections, as they do on a busy service.
const parallelism = 8

// benchPools is what a happy-path benchmark compares.
type benchPools struct {
	bare        *pgxpool.Pool // on the primary
	bareReplica *pgxpool.Pool // on the replica, with replicas
	pool        *failover.Pool
}

// startBench starts a server (and with replicas, a streaming replica) and
// returns a bare pgxpool on each server and a failover.Pool on them all,
// with pool_max_conns=4.
func startBench(b *testing.B, replicas bool) benchPools {
	ctx := context.Background()
	n := 0
	if replicas {
		n = 1
	}
	c := failovertest.Start(b, failovertest.Replicas(n))
	const params = "pool_max_conns=4"
	open := func(dsn string) *pgxpool.Pool {
		p, err := pgxpool.New(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Close)
		return p
	}
	bp := benchPools{bare: open(c.Primary().ConnString(params))}
	dsn := c.Primary().ConnString(params)
	if replicas {
		bp.bareReplica = open(c.Replicas()[0].ConnString(params))
		dsn = c.ConnString(params)
	}
	pool, err := failover.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	bp.pool = pool
	return bp
}

// compareCPU compares op through bare (pool=pgxpool) and ours
// (pool=name), on each number of goroutines given: serially and on
// parallelism goroutines when none is.
func compareCPU[Q any](b *testing.B, bare, ours Q, name string, op func(Q) error, goroutines ...int) {
	if len(goroutines) == 0 {
		goroutines = []int{1, parallelism}
	}
	for _, g := range goroutines {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			cpubench.CompareParallel(b, [2]cpubench.Side{
				{Name: "pool=pgxpool", Op: func() error { return op(bare) }},
				{Name: "pool=" + name, Op: func() error { return op(ours) }},
			}, g)
		})
	}
}

// execer is Exec, which the Reader does not have.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// rowQuerier is what the Reader has in common with them.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// selectOne is QueryRow("SELECT 1").Scan.
func selectOne[Q rowQuerier](q Q) error {
	var v int
	return q.QueryRow(context.Background(), "SELECT 1").Scan(&v)
}

// BenchmarkQueryRowCPU compares QueryRow("SELECT 1").Scan.
func BenchmarkQueryRowCPU(b *testing.B) {
	bp := startBench(b, false)
	compareCPU(b, rowQuerier(bp.bare), rowQuerier(bp.pool), "failover", selectOne)
}

// BenchmarkPgxPoolQueryRowCPU compares QueryRow("SELECT 1").Scan through
// the pgxpool that Pool.PgxPool returns, which follows the primary, beside
// bare pgxpool: what the Pool's connections cost (its dialer, the socket
// that records its reads, the check before a reuse) without its call path,
// as River or sqlc over PgxPool() pay it.
func BenchmarkPgxPoolQueryRowCPU(b *testing.B) {
	bp := startBench(b, false)
	compareCPU(b, rowQuerier(bp.bare), rowQuerier(bp.pool.PgxPool()), "pgxpool-of-failover", selectOne)
}

// BenchmarkDialerCPU compares QueryRow of SELECT 1 on two bare pgxpools,
// one with pgconn's dialer and one with the dialer the Pool installs
// (netconn.DialFunc: shorter keepalives, TCP_USER_TIMEOUT, the time of the
// last read): the share of QueryRowCPU's difference that is the sockets'
// settings rather than the Pool's code.
func BenchmarkDialerCPU(b *testing.B) {
	ctx := context.Background()
	c := failovertest.Start(b, failovertest.Replicas(0))
	open := func(dial pgconn.DialFunc) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(c.Primary().ConnString("pool_max_conns=4"))
		if err != nil {
			b.Fatal(err)
		}
		if dial != nil {
			cfg.ConnConfig.DialFunc = dial
		}
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Close)
		return p
	}
	compareCPU(b, rowQuerier(open(nil)), rowQuerier(open(netconn.DialFunc(netconn.DefaultTCPUserTimeout))), "netconn", selectOne)
}

// garbage keeps BenchmarkGarbageCPU's extra bytes on the heap.
var garbage []byte

// BenchmarkGarbageCPU compares QueryRow of SELECT 1 on one bare pgxpool,
// alone and with 160 bytes of garbage allocated beside each call (the
// size of the rows value the Pool keeps for each Query): what collecting
// those bytes costs, a share of the difference that is neither the Pool's
// code nor the sockets'.
func BenchmarkGarbageCPU(b *testing.B) {
	bp := startBench(b, false)
	bare := func() error { return selectOne(bp.bare) }
	padded := func() error {
		garbage = make([]byte, 160)
		return selectOne(bp.bare)
	}
	compareCPU(b, bare, padded, "garbage", func(op func() error) error { return op() })
}

// BenchmarkExecCPU compares Exec of a one-row INSERT, the path that
// classifies its SQL and notes the write on success.
func BenchmarkExecCPU(b *testing.B) {
	ctx := context.Background()
	bp := startBench(b, false)
	if _, err := bp.bare.Exec(ctx, "CREATE UNLOGGED TABLE bench_exec (v int)"); err != nil {
		b.Fatal(err)
	}
	compareCPU(b, execer(bp.bare), execer(bp.pool), "failover", func(q execer) error {
		_, err := q.Exec(ctx, "INSERT INTO bench_exec (v) VALUES ($1)", 1)
		return err
	})
}

// BenchmarkQueryCPU compares Query of 100 rows, each scanned.
func BenchmarkQueryCPU(b *testing.B) {
	ctx := context.Background()
	bp := startBench(b, false)
	compareCPU(b, rowQuerier(bp.bare), rowQuerier(bp.pool), "failover", func(q rowQuerier) error {
		rows, err := q.Query(ctx, "SELECT generate_series(1, 100)")
		if err != nil {
			return err
		}
		var v, n int
		for rows.Next() {
			if err := rows.Scan(&v); err != nil {
				return err
			}
			n++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if n != 100 {
			return fmt.Errorf("%d rows, want 100", n)
		}
		return nil
	})
}

// BenchmarkSendBatchCPU compares SendBatch of ten reads, each result
// scanned.
func BenchmarkSendBatchCPU(b *testing.B) {
	ctx := context.Background()
	bp := startBench(b, false)
	compareCPU(b, rowQuerier(bp.bare), rowQuerier(bp.pool), "failover", func(q rowQuerier) error {
		batch := &pgx.Batch{}
		for i := range 10 {
			batch.Queue("SELECT $1::int", i)
		}
		br := q.SendBatch(ctx, batch)
		var v int
		for range 10 {
			if err := br.QueryRow().Scan(&v); err != nil {
				br.Close()
				return err
			}
		}
		return br.Close()
	})
}

// BenchmarkReaderQueryRowCPU compares QueryRow("SELECT 1").Scan on a
// replica: bare pgxpool connected to the replica beside the Pool's
// Reader, which routes to that same replica (pool=reader).
func BenchmarkReaderQueryRowCPU(b *testing.B) {
	ctx := context.Background()
	bp := startBench(b, true)
	reader := bp.pool.Reader()
	var port, want int
	if err := bp.bareReplica.QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&want); err != nil {
		b.Fatal(err)
	}
	if err := reader.QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port); err != nil || port != want {
		b.Fatalf("the Reader reads from %d (%v), not the replica at %d", port, err, want)
	}
	compareCPU(b, rowQuerier(bp.bareReplica), rowQuerier(reader), "reader", selectOne)
}

// BenchmarkQueryRowScalingCPU is BenchmarkQueryRowCPU from 1 to 64
// goroutines sharing the pool's 4 connections: per-op CPU on each side as
// callers are added, to show that the Pool's per-call bookkeeping grows
// no faster with contention than pgxpool's own.
//
//	go test -run '^$' -bench QueryRowScalingCPU -count 10 ./failover/ > scaling.txt
//	benchstat -col /pool scaling.txt
func BenchmarkQueryRowScalingCPU(b *testing.B) {
	bp := startBench(b, false)
	compareCPU(b, rowQuerier(bp.bare), rowQuerier(bp.pool), "failover", selectOne, 1, 4, 16, 64)
}

// BenchmarkCausalExec measures what recording a write's WAL position for
// a CausalToken costs: Exec of a one-row INSERT through the Pool without
// and with a token.
//
//	go test -run '^$' -bench CausalExec -count 10 ./failover/ > causal.txt
//	benchstat -col /pool causal.txt
func BenchmarkCausalExec(b *testing.B) {
	ctx := context.Background()
	bp := startBench(b, false)
	if _, err := bp.bare.Exec(ctx, "CREATE UNLOGGED TABLE bench_causal (v int)"); err != nil {
		b.Fatal(err)
	}
	const insert = "INSERT INTO bench_causal (v) VALUES ($1)"
	tokCtx := failover.WithCausalToken(ctx, new(failover.CausalToken))
	cpubench.Compare(b, [2]cpubench.Side{
		{Name: "pool=failover", Op: func() error { _, err := bp.pool.Exec(ctx, insert, 1); return err }},
		{Name: "pool=causal", Op: func() error { _, err := bp.pool.Exec(tokCtx, insert, 1); return err }},
	})
}
