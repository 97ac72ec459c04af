package failover_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// TestIdleKilledConnectionIsNeverUsed kills the backend of the Pool's one
// pooled connection while it is idle (well short of pgxpool's one-second
// ping): the
// write that follows must go out on a new connection and succeed, never
// meet the FATAL waiting on the old one.
func TestIdleKilledConnectionIsNeverUsed(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
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

// TestHeldConnectionIsPeekedWhenGivenBack holds a connection unused while
// its backend is terminated, gives it back, and writes at once: the
// connection was released a moment ago but its socket last read anything
// before the FATAL came, so the peek runs and the write goes out on a new
// connection. Both through the Pool and through PgxPool, whose
// connections are dialled another way.
func TestHeldConnectionIsPeekedWhenGivenBack(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	pool := newPool(t, ctx, c.ConnString("pool_max_conns=1&health_probe_interval=1h"))
	if _, err := pool.Exec(ctx, "CREATE TABLE held_kill (v int)"); err != nil {
		t.Fatal(err)
	}
	type acquirer interface {
		Acquire(context.Context) (*pgxpool.Conn, error)
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}
	for name, q := range map[string]acquirer{"Pool": pool, "PgxPool": pool.PgxPool()} {
		t.Run(name, func(t *testing.T) {
			conn, err := q.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var pid uint32
			if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				conn.Release()
				t.Fatal(err)
			}
			terminate(t, ctx, c.Primary(), pid)
			conn.Release()
			if _, err := q.Exec(ctx, "INSERT INTO held_kill VALUES (1)"); err != nil {
				t.Fatalf("a write right after a held connection was given back failed: %v", err)
			}
		})
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM held_kill").Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d rows, %v; want 2, each written once", n, err)
	}
}
