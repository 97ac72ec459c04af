package stdlib_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	pgxstdlib "github.com/jackc/pgx/v5/stdlib"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/stdlib"
	"github.com/pgfailover/pgfailover/internal/cpubench"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// BenchmarkOpenDBQueryRowCPU measures the client's CPU time per
// database/sql QueryRowContext("SELECT 1").Scan through pgx's
// stdlib.OpenDBFromPool over a bare pgxpool and through this package's
// OpenDB over a failover.Pool, against the same local server in one run
// (cpu-ratio is ours over pgx's; see cpubench):
//
//	go test -run '^$' -bench QueryRowCPU -count 10 ./failover/stdlib/ > cpu.txt
//	benchstat -col /driver cpu.txt
func BenchmarkOpenDBQueryRowCPU(b *testing.B) {
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
	pgxDB := pgxstdlib.OpenDBFromPool(bare)
	b.Cleanup(func() { pgxDB.Close() })
	ourDB := stdlib.OpenDB(pool)
	b.Cleanup(func() { ourDB.Close() })
	compareQueryRow(b, pgxDB, ourDB)
}

// BenchmarkSQLOpenQueryRowCPU is BenchmarkOpenDBQueryRowCPU for the DBs
// sql.Open("pgx", dsn) and sql.Open("pgfailover", dsn) give, which keep
// idle connections in database/sql (ResetSession and IsValid run on every
// statement).
func BenchmarkSQLOpenQueryRowCPU(b *testing.B) {
	c := pgtest.Start(b, pgtest.Options{})
	dsn := c.Primary().ConnString("")
	open := func(driver string) *sql.DB {
		db, err := sql.Open(driver, dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		return db
	}
	compareQueryRow(b, open("pgx"), open(stdlib.DriverName))
}

func compareQueryRow(b *testing.B, pgxDB, ourDB *sql.DB) {
	ctx := context.Background()
	var v int
	query := func(db *sql.DB) func() error {
		return func() error { return db.QueryRowContext(ctx, "SELECT 1").Scan(&v) }
	}
	cpubench.Compare(b, [2]cpubench.Side{
		{Name: "driver=pgx", Op: query(pgxDB)},
		{Name: "driver=pgfailover", Op: query(ourDB)},
	})
}
