// Package hostpool is package failover's hosts at work: for each host, the
// two pgxpools (the Pool's own calls, and the Reader's read-only
// sessions), the checks on their connections, and the probe loop; beside
// them, the calls waiting for a usable host and the connections readied on
// a standby ahead of its promotion.
//
// A [Set] serves one Pool. It holds no host state of its own, only its
// connections' bookkeeping (see internal/hoststate, "What is not host
// state"): what it observes of a host (a login's role, a refused dial, a probe's answer,
// a connection that reports a new role) goes through [Set.Observe] to the
// Pool's owner of host state (internal/hoststate), which publishes the
// routes picks read, and a new host table goes through [Set.SetTable].
// Observe acts on what changed: it logs and records the news, and resets
// the calls pool of a host found demoted.
//
// Every connection of the Pool's, a host's or a following pool's, is
// checked at login ([Set.CheckRole]): its server's role is recorded and
// refused when the pool's target does not accept it. At each acquire a
// non-blocking peek at the socket discards a connection on which anything
// is waiting, a FATAL from a shutdown or an end-of-file ([Set.StillOpen]);
// a calls pool's connection is also discarded when its server has
// reported a role the target refuses ([Set.Reusable]). A host's pools
// dial only while host state counts the host usable, but for the
// connections opened on a standby ahead of its promotion; the probe, and
// the local-first fallback's connect ([Set.Connect]), dial a host
// whatever its state. The probe asks on an idle connection of the host's
// pools when there is one, and closes its own then; a host the Pool does
// not use (a replica under a primary target before the Reader has read)
// holds no probe connection between probes.
//
// The package is below failover and above hoststate, probe and telemetry.
// Of the calls it knows only that they wait and with which statement;
// errors for users, the topology source, the Reader and the local-first
// steerer reach it through the hooks of [Config].
package hostpool
