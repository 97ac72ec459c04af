package failovertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// skipUnderShort skips, under -short, a drill the fast loop leaves out
// (the start, the guide's test and the ledger's checks stay), and names
// the command that runs it.
func skipUnderShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipped under -short; run: go test -race -run '^%s$' ./failover/failovertest/", t.Name())
	}
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newPool(t *testing.T, ctx context.Context, dsn string) *failover.Pool {
	t.Helper()
	pool, err := failover.New(ctx, dsn)
	if err != nil {
		t.Fatalf("failover.New: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// nodeOf returns the name of the node a query through q reaches: each
// server's cluster_name is its node's name.
func nodeOf(t *testing.T, ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) string {
	t.Helper()
	var name string
	if err := q.QueryRow(ctx, "SHOW cluster_name").Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

// scalar runs a one-value query on node n.
func scalar[T any](t *testing.T, ctx context.Context, n *failovertest.Node, sql string) T {
	t.Helper()
	rows, err := n.Query(ctx, sql)
	if err != nil {
		t.Fatal(err)
	}
	v, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[T])
	if err != nil {
		t.Fatalf("%s on %s: %v", sql, n, err)
	}
	return v
}

func inRecovery(t *testing.T, ctx context.Context, n *failovertest.Node) bool {
	t.Helper()
	r, err := n.InRecovery(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
