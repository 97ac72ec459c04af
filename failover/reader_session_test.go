package failover_test

import (
	"testing"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// TestReaderSessionStaysReadOnly: a Reader session logs in with
// default_transaction_read_only on; a statement sent through the Reader
// that turns it off does not outlive its call: the session is closed
// before the next read takes it, and a write through the Reader fails
// again. Here the Reader's pool holds one session, on the primary.
func TestReaderSessionStaysReadOnly(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	ctx := testContext(t)
	pool := newPool(t, ctx, c.ConnString("pool_max_conns=1"))
	if _, err := pool.Exec(ctx, "CREATE TABLE rw (v int)"); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := pool.Reader().QueryRow(ctx, "INSERT INTO rw VALUES (1) RETURNING v").Scan(&v); err == nil {
		t.Fatal("a write through the Reader succeeded on a fresh session")
	}
	for _, turnOff := range []string{"SET default_transaction_read_only = off", "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE"} {
		rows, err := pool.Reader().Query(ctx, turnOff)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if err := pool.Reader().QueryRow(ctx, "INSERT INTO rw VALUES (2) RETURNING v").Scan(&v); err == nil {
			t.Fatalf("after %q, a write through the Reader succeeded on the next call", turnOff)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM rw").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows written through the Reader: %d, %v", n, err)
	}
}
