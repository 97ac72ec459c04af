// Package probe holds a Pool's health probe of one host: the [Prober],
// which asks the server one question on a connection of its own or one
// lent by the host's pools (is it read-only, its zone, its WAL positions,
// whether it replicates synchronously, which server the connection
// reached), and the [Schedule], which says when each host is probed
// next, given what its last probe found, whether calls wait for a usable
// host, and whether a topology source names it the primary; and how a
// probe of a replica that a promotion would make usable waits on the
// server instead of polling it ([Schedule.Watch]), and how a host whose
// name may lag behind a promotion is reached through fresh connections
// ([Schedule.Fresh]); the [Loop] that runs
// one host's probes on that schedule, on an injected clock; and [First],
// the Pool's first probe of every host, which tries the credentials on
// one host at a time until a server has settled them.
//
// The schedule only computes: the loop passes in its clock's readings and
// what each probe found, and the jitter is drawn from an injected random
// source, so that tests drive it on a fake clock. What a probe's answer
// means for the host (its health, its role, the order of observations) is
// the Pool's host state's to decide (internal/hoststate).
package probe
