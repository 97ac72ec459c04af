package stdlib_test

import (
	"database/sql"
	"sync"
	"testing"

	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/failover/stdlib"
)

// TestSQLOpenRetiresIdleConnectionsAfterSwitchover keeps connections idle
// in database/sql (sql.Open keeps them, unlike OpenDB) across a
// switchover. Each holds the old primary's FATAL in its socket; the peek in
// ResetSession must retire it before use, so that every write after the
// switchover succeeds, on the new primary, and none fails.
func TestSQLOpenRetiresIdleConnectionsAfterSwitchover(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	db, err := sql.Open(stdlib.DriverName, c.ConnString("pool_max_conns=4"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const idle = 4
	db.SetMaxIdleConns(idle)
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatal(err)
	}
	// Open idle connections: hold them at once, then give them back.
	var conns []*sql.Conn
	for range idle {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	for _, conn := range conns {
		conn.Close()
	}
	if n := db.Stats().Idle; n != idle {
		t.Fatalf("%d idle connections, want %d", n, idle)
	}

	next := c.Nodes()[1]
	if _, err := c.Switchover(ctx, next); err != nil {
		t.Fatal(err)
	}
	// As many writers as idle connections, so that each stale one is
	// handed out.
	var wg sync.WaitGroup
	errs := make(chan error, 4*idle)
	for range idle {
		wg.Go(func() {
			for range 4 {
				var port int
				err := db.QueryRowContext(ctx, "INSERT INTO t VALUES (1) RETURNING current_setting('port')::int").Scan(&port)
				switch {
				case err != nil:
					errs <- err
				case port != next.Port():
					t.Errorf("a write went to port %d, not the new primary %d", port, next.Port())
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a write after the switchover failed: %v", err)
	}
}
