// Package lograte keeps a repeated warning from flooding a log: a Limiter
// lets one line per key through each interval and counts the lines it
// held back, so the next line that passes can say how many there were.
// It is the module's one rate limiter for warnings: the Pool's (per host
// and message) and those of the Patroni and Kubernetes topology sources
// (per kind) pass through one.
//
// The Limiter reads time from a clock.Clock, so tests drive it with a
// fake clock.
package lograte
