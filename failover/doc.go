// Package failover is a drop-in replacement for pgxpool over a multi-host
// PostgreSQL connection string, with the failover behaviour that usually
// needs a proxy.
//
// Swap one line:
//
//	pool, err := pgxpool.New(ctx, dsn)   // before
//	pool, err := failover.New(ctx, dsn)  // after
//
// where dsn names every server, for example
//
//	postgres://app:secret@db-a:5432,db-b:5432,db-c:5432/app?target_session_attrs=read-write
//
// The Pool keeps one pgxpool per host and sends each call to the best host
// for the target (the primary by default). Hosts are ranked by what was last
// seen of them (see package hosthealth) and probed in the background, so a
// promoted replica is found without a restart and connections to a demoted
// primary are closed instead of failing every write until they expire.
//
// # Reads on replicas
//
// Pool.Reader returns a surface for reads (Query, QueryRow, SendBatch,
// read-only BeginTx; no Exec) that spreads reads round-robin over the
// replicas that are fresh enough, same zone first, and falls back to the
// primary, in sessions that log in read-only (see Reader for what that
// does not stop). For pin_after_write after a write through the Pool,
// a read goes to a replica only once it has replayed a position of the
// primary sampled after the write, waiting up to replica_wait for one,
// else to the primary (read-your-writes); with max_lag set, a
// replica serves reads only while an upper bound on its staleness, taken
// from the primary's WAL position samples, is within it. A CausalToken
// carried in the context replaces the pin with its writes' own position.
// While no primary is usable, a read that must see writes goes to a
// replica that has replayed as much WAL as any replica holds
// (outage_reads; see Reader for what it then sees).
//
// # What is retried
//
// A call moves to the next host only when that cannot run a statement
// twice. Connecting and BEGIN always may. A replay-safe read (see
// ReplaySafe and NoRetry) may while none of its rows has reached the
// caller (for QueryRow: until the query completes). Any other statement may only when it provably never ran: it did
// not reach the server, or the server refused it before running it, as a
// standby refuses a write. When a statement that may write was cut off in
// flight, the call fails with ErrCommitOutcomeUnknown and is never run
// again. Connections from Acquire and open transactions are pinned to their
// host; a transaction whose connection died fails with ErrTxInterrupted,
// and RunTx runs a whole transaction function again in that case. Which
// errors mean that a statement did not commit is one rule, with its scope:
// https://github.com/pgfailover/pgfailover/blob/main/docs/errors.md#the-rule.
//
// # Waiting for a primary
//
// When no host can take a call, the call waits and wakes as soon as a
// probe or another call sees a host change; while any call waits, the
// hosts are probed fast and the replica likeliest to be promoted is
// watched on the server. One deadline, failover_max_duration (30s; with
// fallback_local, query_wait_timeout when shorter) from the call's first
// failover event, bounds the waiting and the attempts, with the caller's
// context. When the call cannot finish, a
// *FailoverError (wrapping ErrNoHost or ErrBudgetExhausted) says what each
// host did. The schedule, and what it costs a fleet, are in the guide's
// https://github.com/pgfailover/pgfailover/blob/main/docs/how-failover-works.md.
//
// # A *pgxpool.Pool, and database/sql
//
// PgxPool returns a genuine *pgxpool.Pool for libraries that need the
// concrete type. Its new connections go to the best host for the target,
// with the same role check, peek before use and reset on demotion, but it
// fails over at the connection level only: statements are not replayed and
// its errors are pgx's own. Package failover/stdlib builds database/sql on
// it.
//
// # Hosts that come and go
//
// Config.Topology takes a topology.Source, which reports the cluster's
// members as they change (patroni_api_urls makes one that asks Patroni);
// they are merged with the connection string's hosts. Hosts are known by address: one that stays keeps its state and
// connections, a new one starts unknown, and one that leaves is drained and
// closed.
//
// # Observability
//
// Config.MeterProvider receives the Pool's metrics, named as OpenTelemetry's
// conventions for database clients name them where they apply
// (db.system.name, server.address, server.port, and db.client.connection.*
// for the statistics of each host's pgxpools), and pgfailover.* where they
// do not: calls that survived or failed a failover, the time calls waited
// and the time the target had no usable host, attempts per call, each
// host's state and role, replica staleness, the Reader's reads, probes,
// connection attempts, and connections closed by reason; the catalog is
// https://github.com/pgfailover/pgfailover/blob/main/docs/observability.md.
// Config.TracerProvider receives a
// pgfailover.failover span per failover episode, with an event per host
// that failed and one for the wait. Config.Logger receives each change of
// a host's state or role once, whoever noticed it, and rate-limited
// warnings (one per host and kind each 10 s; the Patroni source's, one
// per kind a minute); the Pool logs nothing
// without it. A call that meets no failover event records nothing, except
// a read through the Reader, which counts itself in pgfailover.reads. No
// password appears in any error, log line, metric or span.
//
// # Reference and guide
//
// ParseConfig lists every connection-string key with its default and
// range. The guide is one page per task, in
// https://github.com/pgfailover/pgfailover/tree/main/docs:
//
//   - getting-started.md: a real cluster, the connection string, a target
//   - how-failover-works.md: what moves to another host, waiting for a
//     primary, probing and its cost, the knobs
//   - guarantees.md: what holds through a failover, and the tests that show it
//   - reads.md: the Reader, read-your-writes, causal tokens, max_lag
//   - databasesql-and-pgxpool.md: database/sql, PgxPool, LISTEN/NOTIFY
//   - patroni.md: Patroni, other topology sources, local-first fallback
//   - kubernetes.md: hosts and the next primary from the operators' pods and
//     CloudNativePG's Cluster (module github.com/pgfailover/pgfailover/kubernetes)
//   - observability.md: the metric catalog, spans, logs
//   - errors.md: each error, the did-not-run rule, settling an unknown outcome
//   - performance.md: client CPU beside pgxpool, failover timings
//   - testing.md: a failover in your service's own go test
//   - contributing.md: running the tests, CI, the packages
package failover
