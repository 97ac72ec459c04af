// Package telemetry holds a Pool's OpenTelemetry instruments and its log
// lines: every metric name, unit, description and attribute the Pool
// records, the span of a call's failover episode, and the text of what it
// logs. The Pool decides when something happened; this package says how
// it is recorded.
//
// [Instruments] records on the providers the Pool was given (the global
// ones when nil) and imports only the OpenTelemetry API. What a call
// records (the Reader's count of where each read went,
// [Instruments.ReadRouted], and a failover episode's counts and times)
// uses attribute sets built once, per host in a [Server] and per reason
// and outcome in the Instruments, so that it allocates nothing; what a
// probe, a connect or a closed connection records builds its set when it
// happens. Nothing here runs on a call that meets no failover event, but
// ReadRouted. The observable
// instruments (host state, replica staleness, each pgxpool's statistics)
// read what the Pool hands their callback at each collection
// ([Observation]), so this package knows nothing of the Pool's types.
//
// [Logger] writes to the Pool's *slog.Logger, and is silent without one.
// Its warnings pass through one rate limiter (internal/lograte) per host
// and message.
package telemetry
