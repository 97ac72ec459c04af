package failover_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// TestWriteRefusedUnderATargetThatTakesReplicas: with target=any the
// replica may be the host in use, and a write there is refused. That is
// the caller's own error, returned at once as libpq would, not a failover
// to walk (or spin) on.
func TestWriteRefusedUnderATargetThatTakesReplicas(t *testing.T) {
	ctx := testContext(t)
	c := pgtest.Start(t, pgtest.Options{Replicas: 1})
	replica, primary := c.Replicas()[0], c.Primary()
	// The replica first: with target=any it is the first pick.
	dsn := "postgres://postgres:" + c.Password() + "@" + replica.Addr() + "," + primary.Addr() + "/postgres?target=any"
	pool := newPool(t, ctx, dsn)
	if got := serverPort(t, ctx, pool); got != replica.Port() {
		t.Fatalf("reads go to port %d, want the replica's %d", got, replica.Port())
	}
	_, err := pool.Exec(ctx, "CREATE TABLE t (id int)")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Fatalf("write on the replica: want 25006, got %v", err)
	}
	var fe *failover.FailoverError
	if errors.As(err, &fe) || errors.Is(err, failover.ErrCommitOutcomeUnknown) {
		t.Fatalf("a refused write is not a failover: %v", err)
	}
}

// TestTxSurvivesAStatementWhoseContextHadEnded: a statement whose context
// had already ended is never sent, and leaves the transaction as it was;
// the transaction still commits.
func TestTxSurvivesAStatementWhoseContextHadEnded(t *testing.T) {
	ctx := testContext(t)
	c := pgtest.Start(t, pgtest.Options{})
	pool := newPool(t, ctx, c.ConnString(""))
	if _, err := pool.Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := tx.Exec(ended, "INSERT INTO t VALUES (0)"); !errors.Is(err, context.Canceled) {
		t.Fatalf("statement with an ended context: %v", err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM t WHERE id = 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("committed rows: %d, %v", n, err)
	}
}
