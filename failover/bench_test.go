package failover_test

import (
	"context"
	"testing"

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
