// Package backoff is the one backoff of the module: one curve
// (Exponential: a base wait that doubles with each failure in a row up to
// a cap) and two ways to jitter it, each for its own need: DrawFull, from
// [0, base), for a caller that wants to try again soon, and DrawEqual,
// from [base/2, base], for a backoff that must leave a host alone.
//
// Its users:
//
//   - a Pool's calls, its Listener and the database/sql driver of
//     failover/stdlib wait between attempts with FullJitter
//     (failover_backoff_initial doubling to failover_backoff_max): a call
//     holds the hosts it failed on back until its wait ends, on the Pool's
//     clock; a Policy waits it out on a clock: the Pool's for RunTx and
//     the Listener, the wall clock for the driver;
//   - the probe schedule backs off a host that cannot be reached on the
//     curve, with DrawEqual, reading the Pool's clock;
//   - the local-first fallback (patroni.Fallback) cools a candidate that
//     failed on the curve, with DrawEqual, at the times its caller reads
//     from the Pool's clock;
//   - the Reader pauses between its questions to a replica that has not
//     yet replayed a read's position on the curve, without jitter;
//   - the Kubernetes topology source pauses after a failed list or watch
//     on the curve, with DrawEqual, on its own clock.
//
// The curve and the draws are pure: the caller counts the failures and
// passes the random source, so tests fix the draw.
package backoff
