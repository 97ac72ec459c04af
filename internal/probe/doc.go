// Package probe holds the schedule of a Pool's health probes: when each
// host is probed next, given what its last probe found, whether calls wait
// for a usable host, and whether a topology source names it the primary;
// and how a probe of a replica that a promotion would make usable waits on
// the server instead of polling it ([Schedule.Watch]).
//
// It only computes: the Pool's probe loop passes in its clock's readings
// and what each probe found, and the jitter is drawn from an injected
// random source, so that tests drive it on a fake clock.
package probe
