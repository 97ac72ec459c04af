// Package clock is the module's one clock interface: the time source of
// the Pool and of what it runs. The Pool reads the time and makes its
// timers through a Clock, so that the walk, its waits, its backoffs and
// RunTx's budget all follow one clock, and it hands the same Clock to the
// Patroni topology source it builds (patroni.SourceConfig.Clock: the
// spacing of its reads and of its warnings) and to that source's client
// (patroni.ClientConfig.Clock: the timing of its requests). Tests replace
// it with a Fake, which moves only when told to.
package clock
