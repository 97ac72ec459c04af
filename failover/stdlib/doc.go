// Package stdlib is the database/sql driver of pgfailover, on top of pgx's
// own stdlib package, as pgx's is on top of pgx.
//
// There are two ways in. With a Pool already built:
//
//	pool, err := failover.New(ctx, "postgres://app:secret@db-a,db-b,db-c/app")
//	db := stdlib.OpenDB(pool)
//	defer pool.Close() // after db.Close: closing db leaves the Pool open
//
// With a connection string alone, for tools configured by a DSN (goose,
// golang-migrate, GORM's postgres dialector with DriverName "pgfailover"):
//
//	import _ "github.com/pgfailover/pgfailover/failover/stdlib"
//
//	db, err := sql.Open("pgfailover", "postgres://app:secret@db-a,db-b,db-c/app")
//	defer db.Close() // closes the Pool it made
//
// The string takes every key of failover.ParseConfig; pgfailover's keys
// are removed before pgx sees it, so none reaches the server. sql.Open
// parses it (a bad key or value is its error, without the password) and
// connects nothing; the first connection database/sql asks for creates one
// failover.Pool for that *sql.DB, and db.Close closes it (database/sql
// closes a connector that is an io.Closer, since Go 1.17).
//
// # What fails over
//
// Connections come from the Pool's PgxPool: each new one goes to the best
// host for the target (the primary by default), passes the same role
// check, and an idle one is handed out, or reused by database/sql, only
// after a non-blocking peek finds it alive and its host still usable for
// the target. This is connection-level failover: a statement is never run
// again on another host, and its errors are pgx's own. When a host dies or
// is demoted, statements in flight on it fail; the next ones go to the new
// primary.
//
// # When database/sql runs a statement again
//
// database/sql runs an operation again, on another connection, when the
// driver returns driver.ErrBadConn (twice on any connection, then once on
// a new one). pgx's stdlib, which this package uses unchanged, returns
// driver.ErrBadConn only where nothing of the statement was sent:
//
//   - ExecContext, QueryContext, PrepareContext, BeginTx: the connection
//     was already closed before the call;
//   - ExecContext, QueryContext: pgconn.SafeToRetry holds for the error,
//     which in pgx v5.12 means the connection's lock could not be taken
//     (closed or busy) or the context had ended before anything was
//     written;
//   - Ping: any failure (a ping changes nothing);
//   - ResetSession, before a connection database/sql kept idle is reused:
//     it is closed, inside a transaction, or fails its ping; and, added by
//     this package, the peek or the host's state rules it out.
//
// A statement that failed after it was sent (the connection cut, the
// server shut down) returns pgx's error, never driver.ErrBadConn, so
// database/sql never runs a write that may have run. Statements inside a
// transaction, and Commit, are never run again by database/sql.
//
// # Registration
//
// The driver registers itself as "pgfailover" when the package is
// imported, as pgx's stdlib registers "pgx": sql.Open needs the name
// before it is called, which is what an import for its side effect gives
// tools configured by a DSN. It is the one init in this module.
package stdlib
