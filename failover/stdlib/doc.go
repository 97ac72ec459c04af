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
// sqlx does not know the name "pgfailover" and would bind ? placeholders:
// wrap the DB as pgx's, sqlx.NewDb(db, "pgx"), or register the name once,
// sqlx.BindDriver("pgfailover", sqlx.DOLLAR), before sqlx.Open.
//
// The string takes every key of failover.ParseConfig; pgfailover's keys
// are removed before pgx sees it, so none reaches the server. sql.Open
// parses it (a bad key or value is its error, without the password) and
// connects nothing; the first connection database/sql asks for creates one
// failover.Pool for that *sql.DB, and db.Close closes it (database/sql
// closes a connector that is an io.Closer, since Go 1.17).
//
// db.Close returns at once, as with pgx's driver, even while connections
// are held (a *sql.Conn, open *sql.Rows, a *sql.Tx): from then on their
// statements, Ping and Tx.Commit fail with failover.ErrClosed (a commit
// refused so was not sent: the transaction is rolled back), while
// Rollback and closing them still work. The Pool stops probing at once and
// finishes closing when the last of them is closed; that last Close waits
// for it, so no goroutine of the Pool outlives the connections.
//
// # pgx underneath: (*sql.Conn).Raw
//
// Inside (*sql.Conn).Raw, the driver connection is a *Conn, whose method
// Conn returns the *pgx.Conn, for what only pgx does (COPY FROM, LISTEN,
// pgx's types). The type has the name pgx's stdlib gives its own, so pgx's
// documented assertion holds after the import path alone is changed:
//
//	err := sqlConn.Raw(func(c any) error {
//		pc := c.(*stdlib.Conn).Conn()
//		_, err := pc.CopyFrom(ctx, pgx.Identifier{"items"}, []string{"id"}, rows)
//		return err
//	})
//
// What runs on that *pgx.Conn is pgx's alone: its errors get no failover
// meaning, and nothing on it is retried.
//
// # Prepared statements
//
// OpenDB and OpenReaderDB keep no idle connection in database/sql
// (SetMaxIdleConns(0), as pgx's OpenDBFromPool does): when a call ends,
// database/sql closes its driver connection, which goes back to the
// pgxpool, and closes with it the statements prepared on it, which pgx
// deallocates on the server. So a statement from db.PrepareContext is not
// left prepared in any session: a later query, even on the same server
// session, finds no trace of it in pg_prepared_statements. The *sql.Stmt
// still works on whichever host the Pool picks: database/sql prepares it
// again on the connection of each use, and it is deallocated when that
// use ends: two round trips more per use (the prepare and the
// deallocation) than a statement kept prepared. Code that expects a
// statement prepared through the DB in pg_prepared_statements of the
// session its next query runs on finds none. To keep a statement prepared
// across calls, prepare it on a *sql.Conn and hold the Conn, or run the
// query through the Pool, where pgx caches prepared statements per
// connection by default.
//
// Through sql.Open, database/sql keeps idle connections (two by default,
// see DB.SetMaxIdleConns), and a statement stays prepared on an idle
// connection until its last *sql.Stmt is closed, as with pgx's driver;
// those idle connections pass the Pool's checks again before reuse (see
// below).
//
// # What fails over
//
// Connections come from the Pool's PgxPool: each new one goes to the best
// host for the target (the primary by default) and passes the same role
// check; a connect its host refuses (unreachable, shutting down, in the
// wrong role) is tried again, after the Pool's backoff (full jitter: each
// wait drawn below a base that doubles from failover_backoff_initial up to
// failover_backoff_max, on the wall clock), up to failover_max_attempts, so that the first statement after a
// failover waits for the new primary instead of failing. An idle connection is
// handed out, or reused by database/sql (ResetSession), only after a
// non-blocking peek finds it alive and its host still usable for the
// target, and database/sql keeps a connection after a call (IsValid) only
// while it is open and its server has not reported a role the target
// refuses.
//
// A statement is never run again on another host once it was sent. Its
// errors keep the Pool's rule, ErrCommitOutcomeUnknown being the only one
// after which it may have committed (see
// https://github.com/pgfailover/pgfailover/blob/main/docs/errors.md#the-rule),
// with failover's SQL classifier alone deciding what may write (no
// context is consulted):
//
//   - a statement outside a transaction that may write (anything but a
//     plain read, as failover's SQL classifier sees it), cut off in flight
//     (the connection broke, the server shut down or terminated the
//     session, the caller's context ended), returns a *failover.HostError
//     wrapping failover.ErrCommitOutcomeUnknown: it may have committed;
//   - a statement inside a transaction (begun with BeginTx or by the SQL)
//     cut off in flight returns one wrapping failover.ErrTxInterrupted:
//     the server rolled the whole transaction back. Tx.Commit, or a COMMIT
//     sent as a statement, cut off in flight returns
//     ErrCommitOutcomeUnknown, and Tx.Commit on a connection already gone
//     before COMMIT was sent, ErrTxInterrupted;
//   - a read cut off in flight, and every error the server answered with
//     (a constraint, a serialization failure, 25006), are pgx's own.
//
// The cost: the client CPU per QueryRowContext beside pgx's stdlib, over
// the same pgxpool and through sql.Open, is measured in
// docs/performance.md (BenchmarkOpenDBQueryRowCPU and
// BenchmarkSQLOpenQueryRowCPU). Part of it is the peek that keeps a
// statement off a connection its server has already closed, one system
// call, which runs before the reuse of a connection only when its socket
// has read nothing for 50 µs (see docs/guarantees.md for the window that
// leaves).
//
// # When database/sql runs a statement again
//
// database/sql runs an operation again, on another connection, when the
// driver returns driver.ErrBadConn (twice on any connection, then once on
// a new one). This driver returns it only where nothing of the caller's
// was sent: the connection was closed before the call, the context had
// ended before anything was written, ResetSession retired the connection,
// a Ping failed, or BEGIN lost its connection (a session the server
// terminated, or that shut down, after the connection passed its checks
// answers BEGIN with FATAL 57P01): db.BeginTx then begins again on another
// connection, on the new primary, as the Pool's Begin does.
//
// pgx's stdlib returns driver.ErrBadConn for every error pgconn marks
// safe to retry. Up to pgx v5.12, pgconn marked so its "conn closed" also
// when the connection broke while the answer to a statement already sent
// was being read. Measured against PostgreSQL 15 with v5.12: an INSERT
// waiting on a lock when the server was killed, and one waiting for a
// synchronous standby when its session was terminated, both came back from
// pgx's stdlib as driver.ErrBadConn, and database/sql ran them again (the
// second one failed with a duplicate key: the first had committed). pgx
// v5.13 no longer marks that error safe to retry. This driver does not
// rest on the marking: it turns driver.ErrBadConn from a connection that
// was open before the call and closed after it into
// ErrCommitOutcomeUnknown (or ErrTxInterrupted).
//
// # Registration
//
// The driver registers itself as "pgfailover" when the package is
// imported, as pgx's stdlib registers "pgx": sql.Open needs the name
// before it is called, which is what an import for its side effect gives
// tools configured by a DSN. It is the one init in this module.
package stdlib
