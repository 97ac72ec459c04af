// Package engine runs the calls of a failover.Pool: for each statement,
// transaction, batch and read through the Reader, it picks a host, sends
// the work there, settles what a failure means (another host, a typed
// error, or the error as it came), and replays only what provably cannot
// run twice. It reads the hosts' state; it builds no host, probes none
// and follows no topology: package failover does those, and hands the
// engine what it needs when it builds the Pool.
package engine
