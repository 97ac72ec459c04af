// Package clock is the module's one clock interface: the time source of
// the Pool and of what it runs. The Pool reads the time and makes its
// timers through a Clock, so that the walk, its waits, its backoffs and
// RunTx's budget all follow one clock. Through Configure it hands the
// same Clock to what it builds of package patroni, whose configurations
// keep it in an unexported field: the topology source (the spacing of its
// reads and of its warnings), that source's client (the timing of its
// requests for the duration metric) and the local-first fallback (its
// decisions, waits and lifetime timers). Tests replace it with a Fake,
// which moves only when told to.
package clock
