package failover_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/sqlclass"
)

// terminate ends backend pid from a separate superuser connection, as an
// administrator or a crashing server would.
func terminate(t *testing.T, ctx context.Context, n *failovertest.Node, pid uint32) {
	t.Helper()
	conn, err := n.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// With a timeout, pg_terminate_backend waits until the backend has
	// exited, so its FATAL is already on the client's socket.
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_terminate_backend($1, 10000)", int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
}

// whenExecuting waits until a statement containing marker is executing on
// n (sleeping in pg_sleep, so past parsing and planning), then calls act
// with a connection to n and the statement's backend pid. It reports
// failures with t.Error, so it may run in its own goroutine.
func whenExecuting(t *testing.T, ctx context.Context, n *failovertest.Node, marker string, act func(admin *pgx.Conn, pid int32) error) {
	t.Helper()
	conn, err := n.Connect(ctx)
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var pid int32
		err := conn.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
			WHERE wait_event = 'PgSleep' AND pid <> pg_backend_pid() AND strpos(query, $1) > 0`, marker).Scan(&pid)
		switch {
		case err == nil:
			if err := act(conn, pid); err != nil {
				t.Error(err)
			}
			return
		case !errors.Is(err, pgx.ErrNoRows):
			t.Error(err)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Errorf("no statement with %q ever ran", marker)
}

// terminateWhenRunning terminates the backend of the statement containing
// marker while it executes, and waits until the backend is gone.
func terminateWhenRunning(t *testing.T, ctx context.Context, n *failovertest.Node, marker string) {
	t.Helper()
	whenExecuting(t, ctx, n, marker, func(admin *pgx.Conn, pid int32) error {
		_, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1, 10000)", pid)
		return err
	})
}

func TestReadSurvivesPromotion(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	reader, pool := newMeteredPool(t, ctx, c.ConnString("health_probe_interval=1h&failover_max_attempts=100"))
	if _, err := pool.Exec(ctx, "CREATE TABLE kv (k int, v int); INSERT INTO kv VALUES (1, 42)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}

	if err := c.Primary().Crash(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := make(chan error, 1)
	old := c.Primary().Addr()
	go func() {
		// Promote only once the read below has found the primary gone.
		deadline := time.Now().Add(30 * time.Second)
		for pool.Stat().Hosts()[0].State != hosthealth.TransportError {
			if time.Now().After(deadline) {
				promoted <- fmt.Errorf("the read never reached %s", old)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		promoted <- c.Promote(ctx, c.Nodes()[1])
	}()
	var v int
	err := pool.QueryRow(ctx, "SELECT v FROM kv WHERE k = $1", 1).Scan(&v)
	if perr := <-promoted; perr != nil {
		t.Fatal(perr)
	}
	if err != nil || v != 42 {
		t.Fatalf("read across the promotion = %d, %v; want 42", v, err)
	}
	if got := counters(t, ctx, reader); got["pgfailover.failover.survived"] != 1 || got["pgfailover.failover.failed"] != 0 {
		t.Fatalf("counters: %v; want one survived call", got)
	}
}

func TestQueryReplaysOnlyBeforeTheFirstRow(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	reader, pool := newMeteredPool(t, ctx, c.ConnString("health_probe_interval=1h"))

	t.Run("cut before the first row is replayed", func(t *testing.T) {
		// The backend dies while it runs the query, before any row is sent.
		const marker = "before-first-row-71c2"
		var wg sync.WaitGroup
		wg.Go(func() { terminateWhenRunning(t, ctx, c.Primary(), marker) })
		rows, err := pool.Query(ctx, "SELECT g FROM generate_series(1, 3) g, pg_sleep(0.5) /* "+marker+" */")
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			t.Fatalf("a replay-safe read cut before its first row failed: %v", err)
		}
		if fmt.Sprint(got) != "[1 2 3]" {
			t.Fatalf("rows = %v, want [1 2 3] exactly once", got)
		}
		if got := counters(t, ctx, reader); got["pgfailover.failover.survived"] != 1 {
			t.Fatalf("counters: %v; want the replayed read counted as survived", got)
		}
	})

	t.Run("cut after the first row is not", func(t *testing.T) {
		// Rows big enough that the server flushes the first ones before it
		// sleeps on the third.
		rows, err := pool.Query(ctx, `SELECT g, repeat('x', 100000) FROM generate_series(1, 3) g,
			LATERAL (SELECT pg_sleep(CASE WHEN g = 3 THEN 30 ELSE 0 END)) s`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var seen []int
		for rows.Next() {
			var g int
			var pad string
			if err := rows.Scan(&g, &pad); err != nil {
				t.Fatal(err)
			}
			seen = append(seen, g)
			if len(seen) == 1 {
				terminate(t, ctx, c.Primary(), rows.Conn().PgConn().PID())
			}
		}
		if rows.Err() == nil {
			t.Fatal("rows ended without an error after their connection was cut")
		}
		var he *failover.HostError
		if !errors.As(rows.Err(), &he) || he.Addr != c.Primary().Addr() {
			t.Errorf("error does not name the host: %v", rows.Err())
		}
		if len(seen) > 2 || seen[0] != 1 || (len(seen) == 2 && seen[1] != 2) {
			t.Fatalf("rows seen %v: rows from a second execution were spliced in", seen)
		}
	})

	t.Run("QueryRow cut after its row is run again", func(t *testing.T) {
		// The first row is big enough to be flushed before the server
		// sleeps on the second; QueryRow has scanned it when the backend
		// dies, and its Scan runs the read again.
		const marker = "after-row-5d1e"
		var wg sync.WaitGroup
		wg.Go(func() { terminateWhenRunning(t, ctx, c.Primary(), marker) })
		var g int
		var pad string
		err := pool.QueryRow(ctx, `SELECT g, repeat('x', 100000) FROM generate_series(1, 2) g,
			LATERAL (SELECT pg_sleep(CASE WHEN g = 2 THEN 1 ELSE 0 END)) s /* `+marker+` */`).Scan(&g, &pad)
		wg.Wait()
		if err != nil || g != 1 || len(pad) != 100000 {
			t.Fatalf("a replay-safe QueryRow cut after its row: g=%d, %d bytes, %v; want 1 and no error", g, len(pad), err)
		}
	})
}

func TestSentWriteIsNeverRunAgain(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=1h"))
	// No unique key: a second execution would show as a second row.
	if _, err := pool.Exec(ctx, "CREATE TABLE hits (n int)"); err != nil {
		t.Fatal(err)
	}

	const marker = "sent-write-3f9c"
	var wg sync.WaitGroup
	wg.Go(func() { terminateWhenRunning(t, ctx, c.Primary(), marker) })
	_, err := pool.Exec(ctx, "INSERT INTO hits SELECT 1 FROM pg_sleep(2) /* "+marker+" */")
	wg.Wait()
	if !errors.Is(err, failover.ErrCommitOutcomeUnknown) {
		t.Fatalf("a write cut off in flight: want ErrCommitOutcomeUnknown, got %v", err)
	}
	var he *failover.HostError
	if !errors.As(err, &he) || he.Addr != c.Primary().Addr() {
		t.Errorf("error does not name the host: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM hits").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n > 1 {
		t.Fatalf("the write ran %d times", n)
	}

	// The same through Query: an INSERT ... RETURNING is a write too.
	const marker2 = "sent-returning-8d1e"
	wg.Go(func() { terminateWhenRunning(t, ctx, c.Primary(), marker2) })
	rows, err := pool.Query(ctx, "INSERT INTO hits SELECT 2 FROM pg_sleep(2) RETURNING n /* "+marker2+" */")
	wg.Wait()
	if err == nil {
		for rows.Next() {
		}
		err = rows.Err()
	}
	if !errors.Is(err, failover.ErrCommitOutcomeUnknown) {
		t.Fatalf("INSERT ... RETURNING cut off: want ErrCommitOutcomeUnknown, got %v", err)
	}
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM hits WHERE n = 2").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n > 1 {
		t.Fatalf("INSERT ... RETURNING ran %d times", n)
	}
}

func TestTransactionInterrupted(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=1h"))
	if _, err := pool.Exec(ctx, "CREATE TABLE accounts (id int, balance int)"); err != nil {
		t.Fatal(err)
	}

	t.Run("a statement after the connection died", func(t *testing.T) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "INSERT INTO accounts VALUES (1, 100)"); err != nil {
			t.Fatal(err)
		}
		terminate(t, ctx, c.Primary(), tx.Conn().PgConn().PID())
		_, err = tx.Exec(ctx, "UPDATE accounts SET balance = 0")
		if !errors.Is(err, failover.ErrTxInterrupted) {
			t.Fatalf("want ErrTxInterrupted, got %v", err)
		}
		var he *failover.HostError
		if !errors.As(err, &he) || he.Addr != c.Primary().Addr() {
			t.Errorf("error does not name the host: %v", err)
		}
	})

	t.Run("COMMIT on a connection that died idle", func(t *testing.T) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO accounts VALUES (2, 100)"); err != nil {
			t.Fatal(err)
		}
		terminate(t, ctx, c.Primary(), tx.Conn().PgConn().PID())
		// The server's FATAL is already waiting, so COMMIT is never sent:
		// the outcome is known, not uncertain.
		err = tx.Commit(ctx)
		if !errors.Is(err, failover.ErrTxInterrupted) || errors.Is(err, failover.ErrCommitOutcomeUnknown) {
			t.Fatalf("want ErrTxInterrupted, got %v", err)
		}
	})

	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM accounts").Scan(&n); err != nil || n != 0 {
		t.Fatalf("interrupted transactions left %d rows (%v)", n, err)
	}
}

func TestRunTxRunsAgainAfterAnInterruption(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=1h"))
	if _, err := pool.Exec(ctx, "CREATE TABLE ledger (entry text)"); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	err := failover.RunTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		run := runs.Add(1)
		if _, err := tx.Exec(ctx, "INSERT INTO ledger VALUES ('credit')"); err != nil {
			return err
		}
		if run == 1 {
			// The first run loses its connection before COMMIT.
			terminate(t, ctx, c.Primary(), tx.Conn().PgConn().PID())
		}
		_, err := tx.Exec(ctx, "INSERT INTO ledger VALUES ('debit')")
		return err
	})
	if err != nil {
		t.Fatalf("RunTx: %v", err)
	}
	if runs.Load() != 2 {
		t.Fatalf("fn ran %d times, want 2", runs.Load())
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM ledger").Scan(&n); err != nil || n != 2 {
		t.Fatalf("ledger has %d entries (%v), want the 2 of one committed run", n, err)
	}

	// An error of fn's own is returned, not retried.
	mine := errors.New("insufficient funds")
	runs.Store(0)
	err = failover.RunTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error { runs.Add(1); return mine })
	if !errors.Is(err, mine) || runs.Load() != 1 {
		t.Fatalf("RunTx with fn's own error = %v after %d runs", err, runs.Load())
	}
}

func TestOverrides(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=1h"))

	// A read the classifier would replay is not replayed under NoRetry.
	const marker = "no-retry-5a0b"
	var wg sync.WaitGroup
	wg.Go(func() { terminateWhenRunning(t, ctx, c.Primary(), marker) })
	var one int
	err := pool.QueryRow(failover.NoRetry(ctx), "SELECT 1 FROM pg_sleep(0.5) /* "+marker+" */").Scan(&one)
	wg.Wait()
	if err == nil {
		t.Fatal("NoRetry: the read was replayed")
	}

	// A statement the classifier refuses (setseed changes session state) is
	// replayed under ReplaySafe.
	const q = "SELECT setseed(0.5), 42 FROM pg_sleep(0.5) /* replay-safe-62dd */"
	if sqlclass.ReplaySafe(q) {
		t.Fatalf("the classifier calls %q replay-safe; pick another statement", q)
	}
	wg.Go(func() { terminateWhenRunning(t, ctx, c.Primary(), "replay-safe-62dd") })
	var seed string
	var answer int
	err = pool.QueryRow(failover.ReplaySafe(ctx), q).Scan(&seed, &answer)
	wg.Wait()
	if err != nil || answer != 42 {
		t.Fatalf("ReplaySafe: %d, %v", answer, err)
	}
}

func TestExactlyOnceUnderChaos(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2), failovertest.SyncReplication())
	pool := newPool(t, ctx, c.ConnString("pool_max_conns=4&health_probe_interval=100ms&failover_max_duration=300ms"))
	if _, err := pool.Exec(ctx, "CREATE TABLE ids (id bigint)"); err != nil {
		t.Fatal(err)
	}

	var (
		ledger failovertest.Ledger[int64]
		next   atomic.Int64
		stop   = make(chan struct{})
		wg     sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := next.Add(1)
				_, err := pool.Exec(ctx, "INSERT INTO ids VALUES ($1)", id)
				ledger.Record(id, err)
			}
		})
	}
	progress := func() int64 { return next.Load() }
	unsentSoFar := func() int { return ledger.Count(failovertest.Failed) }
	const cycles = 3
	for i := range cycles {
		at := progress()
		waitUntil(t, 30*time.Second, "writes before the kill", func() bool { return progress() > at+100 })
		old, err := c.CrashPrimary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The outage outlasts the writers' budget (300ms), so some writes
		// give up without having run before a replica is promoted.
		failed := unsentSoFar()
		waitUntil(t, 30*time.Second, "writes to give up during the outage", func() bool { return unsentSoFar() > failed })
		to, err := c.BestStandby(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Promote(ctx, to); err != nil {
			t.Fatalf("cycle %d: promote %s: %v", i, to, err)
		}
		if err := c.Rejoin(ctx, old); err != nil {
			t.Fatalf("cycle %d: rejoin %s: %v", i, old, err)
		}
	}
	at := progress()
	waitUntil(t, 30*time.Second, "writes after the last failover", func() bool { return progress() > at+100 })
	close(stop)
	wg.Wait()

	// Acknowledged ids present once, those that failed without running
	// absent, those of unknown outcome at most once, and nothing else.
	v, err := ledger.Check(ctx, pool, "ids", "id")
	if err != nil {
		t.Error(err)
	}
	if v.Unrecorded != 0 {
		t.Errorf("%d ids present but never written", v.Unrecorded)
	}
	t.Logf("%d failovers: %v", cycles, v)
}
