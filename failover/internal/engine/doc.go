// Package engine runs the calls of a failover.Pool: for each statement,
// transaction, batch and read through the Reader, and each connect of a
// following pool (package follow), it picks a host, sends the work there,
// settles what a failure means (outcome.Decide: another host, a typed
// error, or the error as it came), and runs again only what provably
// cannot run twice. It reads the hosts' state and hands what its calls
// observe of a host to hostpool.Set; it builds no host, runs no probe and
// follows no topology: packages failover and hostpool do those, and
// package failover hands the engine what it needs when it builds the Pool.
package engine
