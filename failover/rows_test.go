package failover_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// Rows and rows values are never handed out twice: a row kept after its
// Scan, and rows kept after their Close, still answer for their own
// execution after the connection has served many more calls (several
// slabs' worth), and while it holds the next row's query for its Scan.
func TestKeptRowsStayTheirOwn(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	pool := newPool(t, ctx, c.ConnString("pool_max_conns=1"))

	first := pool.QueryRow(ctx, "SELECT 1/0")
	var v int
	firstErr := first.Scan(&v)
	if pgErr, ok := errors.AsType[*pgconn.PgError](firstErr); !ok || pgErr.Code != "22012" {
		t.Fatalf("SELECT 1/0: %v, want division_by_zero", firstErr)
	}
	scanned := pool.QueryRow(ctx, "SELECT 1")
	if err := scanned.Scan(&v); err != nil || v != 1 {
		t.Fatalf("SELECT 1: %d, %v", v, err)
	}
	// The one connection holds the next query until its Scan; the rows
	// scanned before answer as pgx's do, and leave it alone.
	next := pool.QueryRow(ctx, "SELECT 2")
	if err := first.Scan(&v); err != firstErr {
		t.Errorf("failed row scanned again: %v, want its own %v", err, firstErr)
	}
	if err := scanned.Scan(&v); !errors.Is(err, pgx.ErrNoRows) {
		t.Errorf("row scanned again: %v, want pgx.ErrNoRows", err)
	}
	if err := next.Scan(&v); err != nil || v != 2 {
		t.Fatalf("the row sent in between: %d, %v, want 2", v, err)
	}
	firstRows, err := pool.Query(ctx, "SELECT generate_series(1, 3)")
	if err != nil {
		t.Fatal(err)
	}
	for firstRows.Next() {
	}
	firstRows.Close()

	const n = 200
	seen := map[pgx.Row]bool{first: true}
	for i := range n {
		r := pool.QueryRow(ctx, "SELECT $1::int", i)
		if err := r.Scan(&v); err != nil || v != i {
			t.Fatalf("row %d: %d, %v", i, v, err)
		}
		if seen[r] {
			t.Fatalf("row %d: a row value handed out before", i)
		}
		seen[r] = true
	}
	for i := range n {
		rows, err := pool.Query(ctx, "SELECT generate_series(1, $1::int)", i%5+1)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	// Scanned again, the first row still reports its own outcome.
	if err := first.Scan(&v); err != firstErr {
		t.Errorf("first row scanned again: %v, want its own %v", err, firstErr)
	}
	if tag := firstRows.CommandTag().String(); tag != "SELECT 3" {
		t.Errorf("first rows' command tag = %q, want SELECT 3", tag)
	}
	if err := firstRows.Err(); err != nil {
		t.Errorf("first rows' Err = %v", err)
	}
}
