// Package backoff is the one wait between attempts of the module: an
// exponential backoff with full jitter (FullJitter), and a Policy that
// waits it out on a clock. The Pool's calls, its Listener and the
// database/sql driver of failover/stdlib all wait with it, on the Pool's
// clock, so that a test that replaces the clock moves every one of them.
package backoff
