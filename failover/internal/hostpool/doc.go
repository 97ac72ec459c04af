// Package hostpool is package failover's hosts at work: for each host, the
// two pgxpools (the Pool's own calls, and the Reader's read-only
// sessions), the checks on their connections, and the probe loop; beside
// them, the calls waiting for a usable host and the connections readied on
// a standby ahead of its promotion.
//
// A [Set] serves one Pool. It holds no host state of its own: what it
// observes of a host (a login's role, a refused dial, a probe's answer,
// a connection that reports a new role) goes through [Set.Observe] to the
// Pool's owner of host state (internal/hoststate), which publishes the
// routes picks read, and a new host table goes through [Set.SetTable].
// Observe acts on what changed: it logs and records the news, and resets
// the calls pool of a host found demoted.
//
// Every connection of the Pool's, a host's or one of PgxPool's, is
// checked twice (see [InstallConnHooks], [Set.CheckRole], [Set.Usable]):
// at login its server's role is recorded and refused when the target does
// not accept it; at each acquire a non-blocking peek at the socket
// discards a connection on which anything is waiting (a FATAL from a
// shutdown, an end-of-file, a role change). A host's pools dial only
// while host state counts the host usable; the probe alone dials one
// that is not.
//
// The package is below failover and above hoststate, probe and telemetry;
// it knows nothing of calls, errors for users, or the topology source,
// which reach it through the hooks of [Config].
package hostpool
