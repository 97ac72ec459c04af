package failover_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// BenchmarkQueryRow runs QueryRow("SELECT 1") through bare pgxpool and
// through failover.Pool against the same local server in one run, so that
// benchstat can compare them:
//
//	go test -run '^$' -bench QueryRow -count 10 ./failover/ > bench.txt
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

	b.Run("pool=pgxpool", func(b *testing.B) {
		b.ReportAllocs()
		var n int
		for b.Loop() {
			if err := bare.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pool=failover", func(b *testing.B) {
		b.ReportAllocs()
		var n int
		for b.Loop() {
			if err := pool.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
				b.Fatal(err)
			}
		}
	})
}
