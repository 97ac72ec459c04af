package stdlib_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/failover/stdlib"
)

// TestSQLOpenCloseWithConnectionsHeld: db.Close returns while a *sql.Conn
// and an open *sql.Rows are held, as it does with pgx's driver. Both then
// fail with failover.ErrClosed, their Close returns, and the Pool the DB
// made is gone with them: no goroutine is left.
func TestSQLOpenCloseWithConnectionsHeld(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	ignore := goleak.IgnoreCurrent()
	db, err := sql.Open(stdlib.DriverName, c.ConnString("pool_max_conns=4"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(ctx, "SELECT generate_series(1, 3)")
	if err != nil {
		t.Fatal(err)
	}
	if !rows.Next() {
		t.Fatalf("no first row: %v", rows.Err())
	}

	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("db.Close: %v", err)
		}
	case <-time.After(30 * time.Second):
		rows.Close()
		conn.Close()
		<-closed
		t.Fatal("db.Close did not return while a connection and rows were held")
	}

	if _, err := conn.ExecContext(ctx, "SELECT 1"); !errors.Is(err, failover.ErrClosed) {
		t.Errorf("a statement on a connection held across db.Close returned %v, want ErrClosed", err)
	}
	for rows.Next() {
	}
	if err := rows.Err(); !errors.Is(err, failover.ErrClosed) {
		t.Errorf("rows held across db.Close ended with %v, want ErrClosed", err)
	}
	if err := rows.Close(); err != nil {
		t.Errorf("rows.Close: %v", err)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("conn.Close: %v", err)
	}
	goleak.VerifyNone(t, ignore)
}

// TestBeginTxOnTerminatedConnection: BEGIN on a connection whose session
// the server terminated after the connection passed its checks fails with
// pgx's FATAL 57P01. Nothing of the caller's ran, so the driver returns
// driver.ErrBadConn and db.BeginTx takes another connection and succeeds.
func TestBeginTxOnTerminatedConnection(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	admin, err := c.Primary().Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)

	cfg, err := failover.ParseConfig(c.ConnString("pool_max_conns=2"))
	if err != nil {
		t.Fatal(err)
	}
	// The user's PrepareConn runs after the Pool's peek: terminating the
	// session there leaves its FATAL for the BEGIN that follows, as a
	// server shutting down between the peek and BEGIN does.
	var arm atomic.Bool
	terminated := make(chan error, 1)
	cfg.PrepareConn = func(ctx context.Context, conn *pgx.Conn) (bool, error) {
		if arm.CompareAndSwap(true, false) {
			var ok bool
			err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1, 10000)", conn.PgConn().PID()).Scan(&ok)
			if err == nil && !ok {
				err = errors.New("pg_terminate_backend returned false")
			}
			terminated <- err
		}
		return true, nil
	}
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db := stdlib.OpenDB(pool)
	defer db.Close()
	if _, err := db.ExecContext(ctx, "SELECT 1"); err != nil { // one idle connection in the pgxpool
		t.Fatal(err)
	}

	arm.Store(true)
	tx, err := db.BeginTx(ctx, nil)
	select {
	case err := <-terminated:
		if err != nil {
			t.Fatalf("terminating the session: %v", err)
		}
	default:
		t.Fatal("BeginTx did not go through a connection whose session was terminated")
	}
	if err != nil {
		t.Fatalf("db.BeginTx after the session was terminated: %v", err)
	}
	var one int
	if err := tx.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestRawReachesThePgxConn: inside conn.Raw the driver connection is a
// *stdlib.Conn, the name pgx's stdlib gives its own, whose Conn() is the
// *pgx.Conn, for what only pgx can do: COPY FROM and LISTEN. So code
// written for pgx's driver holds after its import path alone is changed.
// Both ways in, sql.Open and OpenDB, hand out the same type.
func TestRawReachesThePgxConn(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	sqlOpen, err := sql.Open(stdlib.DriverName, c.ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	defer sqlOpen.Close()
	for _, tt := range []struct {
		name string
		db   *sql.DB
	}{
		{"sql.Open", sqlOpen},
		{"OpenDB", openDB(t, ctx, c.ConnString(""))},
	} {
		t.Run(tt.name, func(t *testing.T) { rawReachesThePgxConn(t, ctx, tt.db) })
	}
}

func rawReachesThePgxConn(t *testing.T, ctx context.Context, db *sql.DB) {
	if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS items; CREATE TABLE items (id int)"); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	err = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			t.Fatalf("the driver connection is a %T, not a *stdlib.Conn", dc)
		}
		pc := sc.Conn()
		n, err := pc.CopyFrom(ctx, pgx.Identifier{"items"}, []string{"id"},
			pgx.CopyFromRows([][]any{{1}, {2}, {3}}))
		if err != nil {
			return err
		}
		if n != 3 {
			t.Errorf("COPY FROM wrote %d rows, want 3", n)
		}
		_, err = pc.Exec(ctx, "LISTEN items")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var count int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM items").Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != 3 {
		t.Errorf("%d rows after COPY FROM, want 3", count)
	}
	if _, err := db.ExecContext(ctx, "NOTIFY items, 'copied'"); err != nil {
		t.Fatal(err)
	}
	err = conn.Raw(func(dc any) error {
		n, err := dc.(*stdlib.Conn).Conn().WaitForNotification(ctx)
		if err == nil && n.Payload != "copied" {
			t.Errorf("notified %q, want copied", n.Payload)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRowsStayTheirOwn: queries one after the other on one connection,
// the first one's Rows left before its end and closed, each read their
// own result, and a closed Rows reads nothing more; two connections'
// Rows open at once, read in turns, each read their own.
func TestRowsStayTheirOwn(t *testing.T) {
	ctx := testContext(t)
	db := openDB(t, ctx, failovertest.Start(t, failovertest.Replicas(0)).ConnString(""))
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	query := func(q string, n int) (*sql.Rows, []int) {
		t.Helper()
		rows, err := conn.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for len(got) < n && rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return rows, got
	}
	first, got := query("SELECT generate_series(1, 3)", 2)
	if !slices.Equal(got, []int{1, 2}) {
		t.Errorf("the first rows read %v, want [1 2]", got)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, got := query("SELECT generate_series(7, 8)", 3)
	defer second.Close()
	if !slices.Equal(got, []int{7, 8}) {
		t.Errorf("the next rows read %v, want [7 8]", got)
	}
	if first.Next() {
		t.Error("the first rows, closed, read on")
	}
	if _, err := first.Columns(); err == nil {
		t.Error("the first rows, closed, still have columns")
	}

	other, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	a, err := conn.QueryContext(ctx, "SELECT generate_series(1, 3)")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := other.QueryContext(ctx, "SELECT generate_series(11, 13)")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var fromA, fromB []int
	for a.Next() && b.Next() {
		var x, y int
		if err := a.Scan(&x); err != nil {
			t.Fatal(err)
		}
		if err := b.Scan(&y); err != nil {
			t.Fatal(err)
		}
		fromA, fromB = append(fromA, x), append(fromB, y)
	}
	if !slices.Equal(fromA, []int{1, 2, 3}) || !slices.Equal(fromB, []int{11, 12, 13}) {
		t.Errorf("read in turns, the two rows gave %v and %v, want [1 2 3] and [11 12 13]", fromA, fromB)
	}
}
