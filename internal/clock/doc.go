// Package clock is the time source of the Pool and of what it runs: the
// Pool reads the time and makes its timers through a Clock, so that the
// walk, its waits, its backoffs and RunTx's budget all follow one clock,
// and a patroni.Source spaces its reads and its warnings on one. Tests
// replace it with a Fake, which moves only when told to.
package clock
