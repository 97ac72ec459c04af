// Package sqlclass is a lexical classifier of PostgreSQL SQL text. It
// answers two questions the failover retry logic needs before it may run
// a statement a second time on another server:
//
//   - ReplaySafe: is this one statement that only reads, so that running
//     it again after a broken connection, on another server and in a new
//     session, cannot change anything and cannot depend on the lost
//     session?
//   - SessionState: does it change or depend on state that lives in one
//     session (settings, prepared statements, cursors, temporary tables,
//     advisory locks, LISTEN, an open transaction)?
//
// Classify answers both and says why, with a constant reason string.
//
// # What replay-safe means
//
// A text is replay-safe when all of these hold:
//
//   - it holds exactly one statement (a trailing ";", white space and
//     comments are fine; empty statements between semicolons are ignored,
//     as the server ignores them);
//   - it starts, possibly after "(", with SELECT, WITH, VALUES, TABLE or
//     SHOW, or it is EXPLAIN without ANALYZE of such a statement;
//   - it contains no INSERT, UPDATE, DELETE or MERGE anywhere (so no
//     data-modifying CTE at any depth);
//   - it has no locking clause (FOR UPDATE, FOR NO KEY UPDATE, FOR SHARE,
//     FOR KEY SHARE) and no SELECT ... INTO;
//   - it calls none of the built-in functions in the deny list (nextval,
//     setval, currval, lastval, set_config, advisory locks, pg_notify,
//     txid_current, large objects, dblink, server administration, ...),
//     names nothing in the pg_temp schema nor the pg_prepared_statements
//     or pg_cursors views, and uses no U&"..." identifier (whose escapes
//     could spell a denied name);
//   - it lexes completely: an unterminated string, quoted identifier,
//     dollar quote or comment, or a NUL byte, makes it Unknown.
//
// EXPLAIN without ANALYZE is classified by the statement it explains:
// EXPLAIN SELECT is replay-safe, EXPLAIN INSERT is not. EXPLAIN alone does
// not run the INSERT, but the rule costs little and keeps EXPLAIN EXECUTE
// (which needs a prepared statement of the lost session) out. Any ANALYZE
// or ANALYSE in the EXPLAIN options makes it unsafe, even ANALYZE false.
//
// # How it works
//
// One pass over the bytes: a lexer that follows the server's token rules
// for comments (nested /* */ and --), strings ('...' with doubled quotes,
// E'...' with backslash escapes and continuation lines, U&'...', B'...',
// X'...', $tag$ dollar quotes), quoted identifiers and $n parameters, and
// a small state machine over the tokens. Keywords are compared
// case-insensitively in place. The classifier does not allocate, and it
// errs only toward "not replay-safe": a column named update or a user
// function named dblink_x costs a retry opportunity, never a duplicated
// write. Strings are lexed as with standard_conforming_strings = on, the
// server default and what pgx requires.
//
// The keyword tests are deliberately blunt: INSERT, UPDATE, DELETE, MERGE
// and INTO count wherever they stand unquoted, and so do FOR followed by
// UPDATE, NO, KEY or SHARE, so a column spelled update without quotes
// makes a read not replay-safe. A text with several statements is never
// replay-safe; its Kind is the most significant of its statements'
// (Unknown, then TxControl, SessionChange, Write, Read).
//
// # The known gap
//
// A lexer cannot know what a user-defined function, a view, a custom
// operator or a type's input function does. SELECT my_func() is classified
// as replay-safe even if my_func inserts a row, and so is SELECT * FROM v
// when the view v calls nextval. The caller overrides the classifier per
// call when it knows better (failover.NoRetry, failover.ReplaySafe), and
// reads through failover's Reader run in read-only sessions, where such a
// function fails instead of writing.
//
// SHOW and current_setting() are reads: they report settings, and a new
// session has the settings a retry should see. Statements that set them
// are what SessionState reports.
package sqlclass
