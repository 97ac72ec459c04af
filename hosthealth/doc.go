// Package hosthealth keeps the client's view of a set of PostgreSQL hosts
// and decides which one to try next. It is pure logic: observations go in,
// a ranking comes out, the clock is injected, and nothing here does I/O or
// starts goroutines.
//
// # Model
//
// Each host has a [State], best first:
//
//	Healthy          the last connect, probe or query worked, in the right role
//	Unknown          not tried yet, or reset when a new outage began
//	TransientReject  the server said "try again soon" (57P03, 53300, 53400)
//	TransportError   unreachable, or the connection broke (dial, TLS, EOF, 57P01, 57P02)
//	TopologyReject   reachable, but the wrong role for the target
//
// and a zone [Tier], best first: [TierSame] (the host's zone matches the
// client's zone, case-insensitively, or the client set no zone, or the
// target is the primary, since writes follow the primary wherever it is),
// [TierUnknown] (no zone known for the host yet) and [TierOther].
//
// Hosts are ranked by (state, tier). Ties keep the order the hosts were
// given in (the DSN order); nothing is shuffled, so a Healthy host in the
// client's zone stays the first pick from one round to the next.
//
// # Outages
//
// The first failure after a successful connect starts an outage. At that
// moment every Healthy host in another zone is reset to Unknown: a walk
// then tries the local hosts again before it settles on a remote one, so
// traffic comes home once the local hosts recover. A Healthy host in the
// client's zone is left alone and keeps the first place. The outage ends
// at the next connect that finds a Healthy host.
//
// When a connection breaks mid-stream, report the failure with
// [Tracker.ObserveFailure] before asking [Tracker.Pick] for the next host;
// Pick reads the state as of the last observation.
//
// # Targets
//
// A [Target] names the role a usable host must have, using libpq's
// target_session_attrs spellings (see [ParseTarget]). A connect that finds
// a server in a role the target does not accept marks it TopologyReject.
// Under [TargetPreferReplica] both roles are accepted, but a primary ranks
// as if it were TopologyReject while any replica is usable; its reported
// State stays Healthy.
//
// # Errors
//
// [Classify] sorts an error from pgx into a [Class] using SQLSTATE codes
// and Go error types only: Terminal errors (bad credentials, missing
// database) stop a walk, Topology, Transient and Transport errors demote
// the host, and NotFailover errors (ordinary SQL errors, a cancelled
// context) leave it alone.
//
// # Concurrency
//
// A [Tracker] publishes an immutable snapshot through an atomic pointer.
// Pick, Ranking, Status and Role never block and do not allocate; the
// Observe methods serialize on a mutex and rebuild the snapshot only when
// something changed.
package hosthealth
