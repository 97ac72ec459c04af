package stdlib_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/failover/stdlib"
)

// preparedQuery is the statement the prepare tests prepare; pgx names a
// statement prepared through database/sql by its text.
const preparedQuery = "SELECT 42 /* prepared-7c1e */"

// prepared counts the statements prepared as preparedQuery in the session
// q runs on.
func prepared(t *testing.T, ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) int {
	t.Helper()
	var n int
	if err := q.QueryRowContext(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE statement = $1", preparedQuery).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// runStmt runs s and checks its answer.
func runStmt(t *testing.T, ctx context.Context, s *sql.Stmt) {
	t.Helper()
	var v int
	if err := s.QueryRowContext(ctx).Scan(&v); err != nil || v != 42 {
		t.Fatalf("the prepared statement answered %d, %v; want 42", v, err)
	}
}

// TestOpenDBPreparedStatementLifetime: through OpenDB, database/sql keeps
// no idle connection, so a statement from db.PrepareContext is
// deallocated when the connection goes back to the pgxpool: the next
// query, on the same server session (the pgxpool has one), finds it in
// pg_prepared_statements no more. The *sql.Stmt still runs, prepared again
// for each use and deallocated after it. On a *sql.Conn, held between
// calls, a statement stays prepared until it is closed.
func TestOpenDBPreparedStatementLifetime(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	db := openDB(t, ctx, c.ConnString("pool_max_conns=1"))

	s, err := db.PrepareContext(ctx, preparedQuery)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := prepared(t, ctx, db); n != 0 {
		t.Errorf("after db.PrepareContext, the session holds %d statements prepared; want 0: deallocated when database/sql let the connection go", n)
	}
	for range 3 {
		runStmt(t, ctx, s)
		if n := prepared(t, ctx, db); n != 0 {
			t.Errorf("after a use of the *sql.Stmt, the session holds %d statements prepared; want 0", n)
		}
	}

	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cs, err := conn.PrepareContext(ctx, preparedQuery)
	if err != nil {
		t.Fatal(err)
	}
	runStmt(t, ctx, cs)
	if n := prepared(t, ctx, conn); n != 1 {
		t.Errorf("on a held *sql.Conn, %d statements prepared; want 1", n)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if n := prepared(t, ctx, conn); n != 0 {
		t.Errorf("after Stmt.Close on a held *sql.Conn, %d statements prepared; want 0", n)
	}
}

// TestSQLOpenPreparedStatementLifetime: through sql.Open, database/sql
// keeps idle connections (two by default), and a statement prepared twice
// stays prepared on the idle connection until its last Stmt is closed, as
// with pgx's own driver. With SetMaxIdleConns(0) the DB behaves as
// OpenDB's.
func TestSQLOpenPreparedStatementLifetime(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	db, err := sql.Open(stdlib.DriverName, c.ConnString("pool_max_conns=1"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	s1, err := db.PrepareContext(ctx, preparedQuery)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := db.PrepareContext(ctx, preparedQuery)
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if n := prepared(t, ctx, db); n != 1 {
		t.Errorf("with one of two Stmts closed, %d statements prepared; want 1", n)
	}
	runStmt(t, ctx, s2)
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if n := prepared(t, ctx, db); n != 0 {
		t.Errorf("with both Stmts closed, %d statements prepared; want 0", n)
	}

	db.SetMaxIdleConns(0)
	s3, err := db.PrepareContext(ctx, preparedQuery)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if n := prepared(t, ctx, db); n != 0 {
		t.Errorf("with no idle connection kept, %d statements prepared after db.PrepareContext; want 0", n)
	}
	runStmt(t, ctx, s3)
}
