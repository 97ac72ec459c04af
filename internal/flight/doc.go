// Package flight shares one run of a piece of work among every caller that
// asks for it while it runs: one request to a Patroni API per round of
// callers, one discovery round of the local-first fallback, one Pool
// created for a database/sql DB.
//
// It is golang.org/x/sync/singleflight with what the module's callers need
// beside it: a run does not take any one caller's cancellation, a run that
// every caller has left is cancelled and joined, and a run can be started
// with no caller waiting, on a goroutine its owner counts.
//
// replica.Sampler, which internal/hoststate.Owner holds for the Reader's
// pinned reads, is not one: it runs nothing, but names one of its callers
// to ask the primary, on that caller's goroutine and within its context,
// and keeps the answer as state under its own lock.
package flight
