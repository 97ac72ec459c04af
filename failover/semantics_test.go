package failover_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

func TestQueryRowSendsOnceLikePgxpool(t *testing.T) {
	ctx := testContext(t)
	c := pgtest.Start(t, pgtest.Options{})
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=1h"))
	if _, err := pool.Exec(ctx, "CREATE TABLE once (id int)"); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM once").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The statement runs when QueryRow is called, before Scan.
	row := pool.QueryRow(ctx, "INSERT INTO once VALUES (1) RETURNING id")
	waitUntil(t, 10*time.Second, "the insert to commit before Scan", func() bool { return count() == 1 })

	// A Scan that fails on its own does not send the statement again, and
	// a second Scan finds the row gone, as with pgx.
	var wrong time.Time
	if err := row.Scan(&wrong); err == nil {
		t.Fatal("scanning an int into a time succeeded")
	}
	var id int
	if err := row.Scan(&id); err == nil {
		t.Fatal("a second Scan succeeded")
	}
	if n := count(); n != 1 {
		t.Fatalf("the insert ran %d times", n)
	}
}

func TestBatchWriteCutAfterFirstResult(t *testing.T) {
	ctx := testContext(t)
	c := pgtest.Start(t, pgtest.Options{})
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=1h"))
	if _, err := pool.Exec(ctx, "CREATE TABLE batch_rows (n int)"); err != nil {
		t.Fatal(err)
	}

	t.Run("reading results", func(t *testing.T) {
		b := &pgx.Batch{}
		b.Queue("INSERT INTO batch_rows VALUES (1)")
		b.Queue("SELECT pg_sleep(5) /* batch-read-cut-71aa */")
		var wg sync.WaitGroup
		wg.Go(func() { terminateWhenRunning(t, ctx, c.Primary(), "batch-read-cut-71aa") })
		br := pool.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			t.Fatal(err)
		}
		_, err := br.Exec()
		wg.Wait()
		br.Close()
		if !errors.Is(err, failover.ErrCommitOutcomeUnknown) {
			t.Fatalf("a batch that wrote and was cut: want ErrCommitOutcomeUnknown, got %v", err)
		}
	})

	t.Run("closing only", func(t *testing.T) {
		b := &pgx.Batch{}
		b.Queue("INSERT INTO batch_rows VALUES (2)")
		b.Queue("SELECT pg_sleep(5) /* batch-close-cut-93fe */")
		var wg sync.WaitGroup
		wg.Go(func() { terminateWhenRunning(t, ctx, c.Primary(), "batch-close-cut-93fe") })
		err := pool.SendBatch(ctx, b).Close()
		wg.Wait()
		if !errors.Is(err, failover.ErrCommitOutcomeUnknown) {
			t.Fatalf("a batch that wrote and was cut: want ErrCommitOutcomeUnknown, got %v", err)
		}
	})

	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM batch_rows").Scan(&n); err != nil || n != 0 {
		t.Fatalf("cut batches left %d rows (%v); their implicit transaction never committed", n, err)
	}
}

func TestExecUnderNoRetryReportsUnknownOutcome(t *testing.T) {
	ctx := testContext(t)
	c := pgtest.Start(t, pgtest.Options{})
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=1h"))
	// The classifier cannot see that this function writes; NoRetry says so.
	if _, err := pool.Exec(ctx, `CREATE TABLE audit (n int);
		CREATE FUNCTION record_and_wait() RETURNS void LANGUAGE sql AS
		'INSERT INTO audit VALUES (1); SELECT pg_sleep(5)'`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { terminateWhenRunning(t, ctx, c.Primary(), "record-and-wait-52c0") })
	_, err := pool.Exec(failover.NoRetry(ctx), "SELECT record_and_wait() /* record-and-wait-52c0 */")
	wg.Wait()
	if !errors.Is(err, failover.ErrCommitOutcomeUnknown) {
		t.Fatalf("want ErrCommitOutcomeUnknown under NoRetry, got %v", err)
	}
}

func TestCallerDeadlineInsideTransactionIsNotAHostFailure(t *testing.T) {
	ctx := testContext(t)
	c := pgtest.Start(t, pgtest.Options{})
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=1h"))
	runs := 0
	err := failover.RunTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		runs++
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err := tx.Exec(short, "SELECT pg_sleep(2)")
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, failover.ErrTxInterrupted) {
		t.Fatalf("want the caller's deadline, got %v", err)
	}
	if runs != 1 {
		t.Fatalf("fn ran %d times after its own deadline", runs)
	}
	if st := pool.Stat().Hosts()[0]; st.State != hosthealth.Healthy {
		t.Fatalf("the host is %v after a caller's deadline, want healthy", st.State)
	}
}
