package failover_test

import (
	"testing"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// TestReaderReadOnlyIsASessionDefault shows the limit of the Reader's
// read-only sessions: they log in with default_transaction_read_only on,
// a default that a statement of the application's can change, and the
// change outlives the call on the pooled session. Here the one session of
// the Reader's pool, on the primary, takes a write after a SET sent
// through the Reader.
func TestReaderReadOnlyIsASessionDefault(t *testing.T) {
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
	rows, err := pool.Reader().Query(ctx, "SET default_transaction_read_only = off")
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := pool.Reader().QueryRow(ctx, "INSERT INTO rw VALUES (2) RETURNING v").Scan(&v); err != nil || v != 2 {
		t.Fatalf("a write through the Reader after the SET: %d, %v; want it to succeed on the same session", v, err)
	}
}
