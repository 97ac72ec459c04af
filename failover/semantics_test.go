package failover_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
)

func TestQueryRowSendsOnceLikePgxpool(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
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
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
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
	c := failovertest.Start(t, failovertest.Replicas(0))
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
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
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

func TestBatchOfReadsReplaysOnAnotherConnection(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	// Arguments make pgx prepare the statements on the first connection;
	// the replay must prepare them again on the next one. Named arguments
	// are rewritten by pgx as it sends the batch; the replay sends them
	// as queued.
	for _, tt := range []struct {
		name  string
		queue func(b *pgx.Batch)
	}{
		{"positional", func(b *pgx.Batch) {
			b.Queue("SELECT $1::int FROM pg_sleep(0.5) /* batch-replay-4e1d */", 7)
			b.Queue("SELECT $1::text", "second")
		}},
		{"named", func(b *pgx.Batch) {
			b.Queue("SELECT @n::int FROM pg_sleep(0.5) /* batch-replay-4e1d */", pgx.NamedArgs{"n": 7})
			b.Queue("SELECT @s::text", pgx.NamedArgs{"s": "second"})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reader, pool := newMeteredPool(t, ctx, c.ConnString("health_probe_interval=1h"))
			b := &pgx.Batch{}
			tt.queue(b)
			var wg sync.WaitGroup
			wg.Go(func() { terminateWhenRunning(t, ctx, c.Primary(), "batch-replay-4e1d") })
			br := pool.SendBatch(ctx, b)
			var n int
			var s string
			err1 := br.QueryRow().Scan(&n)
			err2 := br.QueryRow().Scan(&s)
			err3 := br.Close()
			wg.Wait()
			if err1 != nil || err2 != nil || err3 != nil || n != 7 || s != "second" {
				t.Fatalf("replayed batch: %d %q; errors %v, %v, %v", n, s, err1, err2, err3)
			}
			if got := counters(t, ctx, reader); got["pgfailover.failover.survived"] != 1 {
				t.Fatalf("counters %v: want the batch counted as survived once", got)
			}
		})
	}
}

func TestCommitAfterCallerDeadline(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=1h"))
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := tx.Exec(short, "SELECT pg_sleep(2)"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("statement past its deadline: %v", err)
	}
	// The statement's deadline closed the connection; COMMIT is never
	// sent, so the outcome is known: nothing committed.
	err = tx.Commit(ctx)
	if !errors.Is(err, failover.ErrTxInterrupted) || errors.Is(err, failover.ErrCommitOutcomeUnknown) {
		t.Fatalf("want ErrTxInterrupted, got %v", err)
	}
	if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatalf("a second Commit: want pgx.ErrTxClosed, got %v", err)
	}
	if st := pool.Stat().Hosts()[0]; st.State != hosthealth.Healthy {
		t.Fatalf("the host is %v after a caller's deadline, want healthy", st.State)
	}
}

func TestReadOnlyByChoiceIsAnOrdinaryError(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=1h"))
	if _, err := pool.Exec(ctx, "CREATE TABLE ro (n int)"); err != nil {
		t.Fatal(err)
	}
	isReadOnlyError := func(err error) bool {
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == "25006" &&
			!errors.Is(err, failover.ErrNoHost) && !errors.Is(err, failover.ErrBudgetExhausted)
	}

	t.Run("read-only transaction", func(t *testing.T) {
		tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "INSERT INTO ro VALUES (1)"); !isReadOnlyError(err) {
			t.Fatalf("want the plain 25006, got %v", err)
		}
	})

	t.Run("read-only session", func(t *testing.T) {
		ro := newPool(t, ctx, c.ConnString("health_probe_interval=1h&options=-c%20default_transaction_read_only%3Don"))
		if _, err := ro.Exec(ctx, "INSERT INTO ro VALUES (2)"); !isReadOnlyError(err) {
			t.Fatalf("want the plain 25006, got %v", err)
		}
		if st := ro.Stat().Hosts()[0]; st.State != hosthealth.Healthy || st.Pool.IdleConns() == 0 {
			t.Fatalf("host %v with %d idle connections after an ordinary error", st.State, st.Pool.IdleConns())
		}
	})

	if st := pool.Stat().Hosts()[0]; st.State != hosthealth.Healthy {
		t.Fatalf("the primary is %v after an ordinary error, want healthy", st.State)
	}
}

// TestWriteRefusedUnderATargetThatTakesReplicas: with target=any the
// replica may be the host in use, and a write there is refused. That is
// the caller's own error, returned at once as libpq would, not a failover
// to walk (or spin) on.
func TestWriteRefusedUnderATargetThatTakesReplicas(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
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
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
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
