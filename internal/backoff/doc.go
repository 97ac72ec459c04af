// Package backoff is the one wait between attempts of the module: an
// exponential backoff with full jitter (FullJitter), and a Policy that
// waits it out on a clock. The Pool's calls and its Listener wait with it
// on the Pool's clock, so that a test that replaces the clock moves them;
// the database/sql driver of failover/stdlib waits with it on the wall
// clock.
package backoff
