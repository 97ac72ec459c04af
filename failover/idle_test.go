package failover_test

import (
	"testing"

	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// TestIdleKilledConnectionIsNeverUsed kills the backend of the Pool's one
// pooled connection while it is idle (well short of pgxpool's one-second
// ping): the
// write that follows must go out on a new connection and succeed, never
// meet the FATAL waiting on the old one.
func TestIdleKilledConnectionIsNeverUsed(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := pgtest.Start(t, pgtest.Options{})
	pool := newPool(t, ctx, c.ConnString("pool_max_conns=1&health_probe_interval=1h"))
	if _, err := pool.Exec(ctx, "CREATE TABLE idle_kill (v int)"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		var pid uint32
		if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		// terminate returns once the backend has exited: its FATAL is on
		// the idle connection's socket.
		terminate(t, ctx, c.Primary(), pid)
		if _, err := pool.Exec(ctx, "INSERT INTO idle_kill VALUES ($1)", i); err != nil {
			t.Fatalf("round %d: a write after the idle connection was killed failed: %v", i, err)
		}
		var now uint32
		if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&now); err != nil {
			t.Fatal(err)
		}
		if now == pid {
			t.Fatalf("round %d: the killed backend %d still serves the Pool", i, pid)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM idle_kill").Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d rows, %v; want 3, each written once", n, err)
	}
}
