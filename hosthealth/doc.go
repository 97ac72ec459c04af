// Package hosthealth keeps the client's view of a changing set of
// PostgreSQL hosts and decides which one to try next for each kind of
// call. It is a pure fold: observations go in, a new immutable [Snapshot]
// with every target's ranking comes out; the clock is injected, and
// nothing here locks, does I/O or starts goroutines.
//
// # Model
//
// A [Snapshot] holds facts about each host, never a verdict for a target:
//
//	State    reachability: Healthy, Unknown, TransientReject or TransportError
//	Role     the role the server reported (primary, replica, or unknown)
//	Claimed  the role a topology source claims; a hint until the server speaks
//	Zone     configured, announced, or advertised later by the server
//	Since    when State or Role last changed, by the injected clock
//	Server   the server the host's name last led to, as it names itself
//
// The states, best first:
//
//	Healthy          the last connect, probe or query worked: the server answered
//	Unknown          not tried yet, or reset when a new outage began
//	TransientReject  the server said "try again soon" (57P03, 53300, 53400)
//	TransportError   unreachable, or the connection broke (dial, TLS, EOF, 57P01, 57P02)
//
// A write refused by a read-only server (25006, a [Topology] failure) is a
// fact about the host too: it is reachable and a replica, so
// [Snapshot.ObserveFailure] makes it Healthy in the replica role.
//
// Hosts are identified by address. [Snapshot.SetHosts] replaces the set, as
// the connection string or a cluster manager such as Patroni describes it:
// a host that stays keeps its state, role and advertised zone, and takes
// the new claimed role (and configured zone, if one is given); a new host
// starts Unknown; a host left out is forgotten; when an address appears
// twice the first entry wins. Observations about an address that is not
// tracked, such as the answer to a call still in flight on a removed host,
// are ignored.
//
// # Targets
//
// A [Target] names the role a call needs, using libpq's
// target_session_attrs spellings (see [ParseTarget]). How a host ranks for
// a target is derived from the facts by [HostStatus.StateFor]: a Healthy
// or Unknown host whose role, reported or else claimed, the target does
// not accept ranks as TopologyReject, and so does a server that answered
// without telling its role when no role is claimed for it either; a host
// that failed ranks by its failure. Under [TargetPreferReplica] both roles
// are accepted, but a primary ranks as TopologyReject while any replica is
// Healthy or Unknown; see [Snapshot.State].
//
// Each target has its own ranking, by (state for the target, zone tier),
// with ties in the order the hosts were given; nothing is shuffled, so a
// Healthy host in the client's zone stays the first pick from one round to
// the next. The zone [Tier], best first, is [TierSame] (the host's zone
// matches the client's, case-insensitively, or the client set no zone, or
// the target is the primary, since writes follow the primary wherever it
// is), [TierUnknown] (no zone known for the host yet) and [TierOther]; see
// [ZoneTier]. The
// same observations thus put the primary first for [TargetPrimary] and a
// local replica first for [TargetReplica], from one state.
//
// # Outages
//
// A failure while no outage is under way, a write refused by a read-only
// server included, starts one. At that moment every Healthy host
// known to be in another zone than the client's is reset to Unknown,
// keeping its role: a walk then tries the local hosts again before it
// settles on a remote one, so traffic comes home once the local hosts
// recover. A Healthy host in the client's zone, or in no known zone, is left
// alone and keeps the first place. The outage ends at the next connect that
// brings a host back from a failure (TransientReject or TransportError) to
// Healthy. A connect to a host that was Healthy or Unknown does not end it:
// otherwise the reset hosts' next probes would end each outage at once, and
// every probe of a host that stays down would start a new one.
//
// When a connection breaks mid-stream, report the failure with
// [Snapshot.ObserveFailure] before picking the next host: the state it
// returns reflects it.
//
// # Errors
//
// [Classify] sorts an error from pgx into a [Class] using SQLSTATE codes
// and Go error types only: Terminal errors (bad credentials, missing
// database) stop a walk, Topology, Transient and Transport errors are
// facts about the host, and NotFailover errors (ordinary SQL errors, a
// cancelled context) leave it alone. [DidNotRun] answers a different
// question, whether the statement may be sent again elsewhere: only when
// the error proves that the server did not run it. [ReportedRole] and
// [RecoveryRole] turn the server's in_hot_standby status or
// pg_is_in_recovery() into a [Role].
//
// # Folding
//
// [New] returns the first state; [Snapshot.SetHosts] and the Observe
// methods return the state that follows, leaving the receiver as it was.
// An observation that changes nothing, such as a success on a host
// already Healthy, returns the receiver itself and allocates nothing, so
// a caller tells a change by comparing pointers. Every target's ranking is
// computed when a state is made, so [Snapshot.Pick], [Snapshot.Ranking],
// [Snapshot.State] and [Snapshot.Usable] never allocate. Host indexes are
// positions in one state; keep addresses, not indexes, across states.
//
// Whoever keeps the current state serializes the folds and publishes the
// result; a Snapshot is safe to read from any number of goroutines.
package hosthealth
