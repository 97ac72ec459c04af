// Package clock is the time source of the failover package: the Pool reads
// the time and makes its timers through a Clock, so that the walk, its
// waits and RunTx's budget all follow one clock, which tests can replace.
package clock
