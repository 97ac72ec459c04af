// Package stalecheck holds the check the Reader's tests make of the
// staleness bound of docs/reads.md: no read begun more than max_lag after
// a write returned reads what the write replaced. Package failover's tests
// run it on the Reader, package stdlib's on the reader DB. It is for
// tests only; no package a program imports depends on it.
package stalecheck
