package stdlib_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/failover/stdlib"
)

// openDB returns a *sql.DB over a new Pool on dsn, both closed when the
// test ends.
func openDB(t *testing.T, ctx context.Context, dsn string) *sql.DB {
	t.Helper()
	pool, err := failover.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDB(pool)
	t.Cleanup(func() { db.Close() })
	return db
}

// openCutDB is openDB on c, with the table cut (id int PRIMARY KEY)
// created and replicated.
func openCutDB(t *testing.T, ctx context.Context, c *failovertest.Cluster) *sql.DB {
	t.Helper()
	db := openDB(t, ctx, c.ConnString("pool_max_conns=4"))
	if _, err := db.ExecContext(ctx, "CREATE TABLE cut (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	return db
}

// connect opens an administrative connection to n, closed when the test
// ends.
func connect(t *testing.T, ctx context.Context, n *failovertest.Node) *pgx.Conn {
	t.Helper()
	conn, err := n.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// waitingBackends returns the pids of the backends on watch's server that
// run a statement on the table cut, or a COMMIT, while waiting on
// waitEvent: the executions of that statement the server has seen so far.
func waitingBackends(t *testing.T, ctx context.Context, watch *pgx.Conn, waitEvent string) []int {
	t.Helper()
	rows, err := watch.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE (query LIKE 'INSERT INTO cut%' OR query ILIKE 'commit') AND pid <> pg_backend_pid()
		AND (wait_event_type = $1 OR wait_event = $1)`, waitEvent)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// count returns how many rows of cut on n have id.
func count(t *testing.T, ctx context.Context, n *failovertest.Node, id int) int {
	t.Helper()
	var k int
	if err := connect(t, ctx, n).QueryRow(ctx, "SELECT count(*) FROM cut WHERE id = $1", id).Scan(&k); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestCutWriteDuringKillAndPromote cuts an INSERT in flight by killing the
// primary and promoting the replica. database/sql must return an error
// wrapping ErrCommitOutcomeUnknown, naming the old primary, and must not
// have run the INSERT again: had it done so, the INSERT would have
// succeeded on the new primary, which holds no such row.
func TestCutWriteDuringKillAndPromote(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	db := openCutDB(t, ctx, c)
	old, next := c.Primary(), c.Nodes()[1]

	// A lock held on the old primary keeps the INSERT in flight there.
	lock := connect(t, ctx, old)
	if _, err := lock.Exec(ctx, "BEGIN; LOCK TABLE cut IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := db.ExecContext(ctx, "INSERT INTO cut (id) VALUES (1)")
		done <- err
	}()
	watch := connect(t, ctx, old)
	waitUntil(t, 30*time.Second, "the INSERT waiting for the lock", func() bool {
		return len(waitingBackends(t, ctx, watch, "Lock")) == 1
	})

	if _, err := c.CrashPrimary(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Promote(ctx, next); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if !errors.Is(err, failover.ErrCommitOutcomeUnknown) {
		t.Fatalf("the cut INSERT returned %v, want ErrCommitOutcomeUnknown", err)
	}
	if he, ok := errors.AsType[*failover.HostError](err); !ok || he.Addr != old.Addr() {
		t.Errorf("the error names host %v, want %s: %v", he, old.Addr(), err)
	}
	if n := count(t, ctx, next, 1); n != 0 {
		t.Fatalf("the cut INSERT is on the new primary %d times: database/sql ran it again", n)
	}

	// Writes resume on the new primary.
	if _, err := db.ExecContext(ctx, "INSERT INTO cut (id) VALUES (2)"); err != nil {
		t.Fatalf("write after the failover: %v", err)
	}
	if n := count(t, ctx, next, 2); n != 1 {
		t.Fatalf("the write after the failover is on the new primary %d times", n)
	}
}

// TestCutCommitRanOnce cuts writes whose commit the server had already
// made durable locally: with the synchronous standby stopped, COMMIT waits
// for it, and the session is terminated while it waits. The server keeps
// the row; the client cannot know that, so the error must wrap
// ErrCommitOutcomeUnknown. The row is there exactly once, and the server
// saw one execution: had database/sql run it again, the second run would
// still be waiting for the standby and the call would not have returned.
func TestCutCommitRanOnce(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.SyncReplication())
	db := openCutDB(t, ctx, c)
	primary := c.Primary()
	if err := c.Replicas()[0].Crash(ctx); err != nil {
		t.Fatal(err)
	}
	watch := connect(t, ctx, primary)

	// cutWhileCommitting runs write, terminates its session once it waits
	// for the standby, and returns write's error.
	cutWhileCommitting := func(write func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- write() }()
		var pids []int
		waitUntil(t, 30*time.Second, "the write waiting for the synchronous standby", func() bool {
			pids = waitingBackends(t, ctx, watch, "SyncRep")
			return len(pids) > 0
		})
		if len(pids) != 1 {
			t.Fatalf("%d sessions run the write, want 1", len(pids))
		}
		if _, err := watch.Exec(ctx, "SELECT pg_terminate_backend($1)", pids[0]); err != nil {
			t.Fatal(err)
		}
		err := <-done
		if pids := waitingBackends(t, ctx, watch, "SyncRep"); len(pids) != 0 {
			t.Fatalf("the write runs again in %d sessions", len(pids))
		}
		return err
	}

	err := cutWhileCommitting(func() error {
		_, err := db.ExecContext(ctx, "INSERT INTO cut (id) VALUES (1)")
		return err
	})
	if !errors.Is(err, failover.ErrCommitOutcomeUnknown) {
		t.Errorf("the cut INSERT returned %v, want ErrCommitOutcomeUnknown", err)
	}
	if n := count(t, ctx, primary, 1); n != 1 {
		t.Errorf("the cut INSERT is there %d times, want 1 (committed locally, run once)", n)
	}

	err = cutWhileCommitting(func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO cut (id) VALUES (2)"); err != nil {
			tx.Rollback()
			return err
		}
		return tx.Commit()
	})
	if !errors.Is(err, failover.ErrCommitOutcomeUnknown) {
		t.Errorf("the cut COMMIT returned %v, want ErrCommitOutcomeUnknown", err)
	}
	if n := count(t, ctx, primary, 2); n != 1 {
		t.Errorf("the transaction's row is there %d times, want 1", n)
	}
}

// TestCutStatementInTransaction terminates the session of a transaction
// while one of its INSERTs waits for a lock: the server rolled the whole
// transaction back, so the error wraps ErrTxInterrupted (not an unknown
// outcome), and nothing of it is on the server.
func TestCutStatementInTransaction(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	db := openCutDB(t, ctx, c)
	lock := connect(t, ctx, c.Primary())
	if _, err := lock.Exec(ctx, "BEGIN; LOCK TABLE cut IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := tx.ExecContext(ctx, "INSERT INTO cut (id) VALUES (1)")
		done <- err
	}()
	watch := connect(t, ctx, c.Primary())
	var pids []int
	waitUntil(t, 30*time.Second, "the INSERT waiting for the lock", func() bool {
		pids = waitingBackends(t, ctx, watch, "Lock")
		return len(pids) == 1
	})
	if _, err := watch.Exec(ctx, "SELECT pg_terminate_backend($1)", pids[0]); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if !errors.Is(err, failover.ErrTxInterrupted) || errors.Is(err, failover.ErrCommitOutcomeUnknown) {
		t.Fatalf("the cut INSERT in a transaction returned %v, want ErrTxInterrupted", err)
	}
	tx.Rollback()
	if _, err := lock.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, ctx, c.Primary(), 1); n != 0 {
		t.Fatalf("the interrupted transaction's row is there %d times", n)
	}
}

// TestCallerDeadlineDuringWrite: a write still running when the caller's
// context ends may yet commit on the server, so its error wraps both
// ErrCommitOutcomeUnknown and the context's error; the next write works.
func TestCallerDeadlineDuringWrite(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	db := openCutDB(t, ctx, c)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := db.ExecContext(short, "INSERT INTO cut SELECT 1 FROM pg_sleep(30)")
	if !errors.Is(err, failover.ErrCommitOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the write the caller gave up on returned %v, want ErrCommitOutcomeUnknown and the deadline", err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO cut VALUES (2)"); err != nil {
		t.Fatalf("the next write: %v", err)
	}
}
