package stdlib_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	pgxstdlib "github.com/jackc/pgx/v5/stdlib"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/failover/stdlib"
	"github.com/pgfailover/pgfailover/internal/cpubench"
)

// BenchmarkOpenDBQueryRowCPU measures the client's CPU time per
// database/sql QueryRowContext("SELECT 1").Scan through pgx's
// stdlib.OpenDBFromPool and through this package's OpenDB, both over the
// same failover.Pool's PgxPool, in one run: the cost of this driver alone
// (cpu-ratio is ours over pgx's; see cpubench). BenchmarkSQLOpenQueryRowCPU
// compares the whole path with pgx's.
//
//	go test -run '^$' -bench QueryRowCPU -count 10 ./failover/stdlib/ > cpu.txt
//	benchstat -col /driver cpu.txt
func BenchmarkOpenDBQueryRowCPU(b *testing.B) {
	c := failovertest.Start(b, failovertest.Replicas(0))
	pool, err := failover.New(context.Background(), c.Primary().ConnString("pool_max_conns=4"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	pgxDB := pgxstdlib.OpenDBFromPool(pool.PgxPool())
	b.Cleanup(func() { pgxDB.Close() })
	ourDB := stdlib.OpenDB(pool)
	b.Cleanup(func() { ourDB.Close() })
	compareQueryRow(b, pgxDB, ourDB, 1)
}

// BenchmarkSQLOpenQueryRowCPU is BenchmarkOpenDBQueryRowCPU for the DBs
// sql.Open("pgx", dsn) and sql.Open("pgfailover", dsn) give on the same
// server: pgx's driver on its own connections beside this one on a
// failover.Pool, with database/sql keeping idle connections (ResetSession
// and IsValid run on every statement). The difference is the whole cost of
// the path, the peek before each reuse included. It runs serially
// (goroutines=1) and on 8 goroutines at once (goroutines=8). Both DBs hold
// at most 4 connections, all kept idle, as the failover.Pool under
// sql.Open("pgfailover") does (pool_max_conns 4 on 2 cores), so that the
// parallel row does not measure database/sql's default of 2 idle
// connections closing and reopening pgx's.
func BenchmarkSQLOpenQueryRowCPU(b *testing.B) {
	c := failovertest.Start(b, failovertest.Replicas(0))
	dsn := c.Primary().ConnString("")
	open := func(driver string) *sql.DB {
		db, err := sql.Open(driver, dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		db.SetMaxOpenConns(4)
		db.SetMaxIdleConns(4)
		return db
	}
	pgxDB, ourDB := open("pgx"), open(stdlib.DriverName)
	for _, g := range []int{1, 8} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) { compareQueryRow(b, pgxDB, ourDB, g) })
	}
}

// compareQueryRow compares QueryRowContext("SELECT 1").Scan through pgxDB
// and ourDB, on goroutines goroutines at once.
func compareQueryRow(b *testing.B, pgxDB, ourDB *sql.DB, goroutines int) {
	ctx := context.Background()
	query := func(db *sql.DB) func() error {
		return func() error {
			var v int
			return db.QueryRowContext(ctx, "SELECT 1").Scan(&v)
		}
	}
	cpubench.CompareParallel(b, [2]cpubench.Side{
		{Name: "driver=pgx", Op: query(pgxDB)},
		{Name: "driver=pgfailover", Op: query(ourDB)},
	}, goroutines)
}
