// Package clock is the time source of the failover and patroni packages:
// the Pool reads the time and makes its timers through a Clock, so that
// the walk, its waits and RunTx's budget all follow one clock, and a
// patroni.Source spaces its reads and its warnings on one; tests replace
// it with a Fake, which moves only when told to.
package clock
