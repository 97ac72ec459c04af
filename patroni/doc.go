// Package patroni learns the members of a Patroni cluster from its REST
// API, so that a Pool can follow the cluster as members come, go and
// change roles, and decides where to connect while the preferred server
// is down.
//
// # Reading the cluster
//
// A [Client] sends GET /cluster to every configured API URL at once and
// takes the first usable answer; the other requests are cancelled and
// waited for. Callers that ask while a round is in flight share it. The
// answer is read up to a size limit and decoded by [Decode], which accepts
// Patroni 3.0 (replicas in state "running", "lag" in bytes or "unknown")
// through 4.x (state "streaming", receive and replay lags and LSNs). A
// field of the wrong type is ignored and a member without host or port is
// skipped; each is recorded as an [Issue], and nothing in an answer can
// make the decoder panic.
//
// Roles map onto the rest of the library as hints: leader (or master) is
// a primary; sync_standby, quorum_standby, replica and standby_leader are
// replicas, the last ranked lowest. A role is claimed only while the
// member's state is "running" or "streaming": Patroni keeps naming a
// leader for a few seconds after its server died, and the server's own
// report always wins over a claim.
//
// # Following the cluster
//
// A [Source] implements topology.Source. It reads the cluster at once,
// then every RefreshInterval, and at once after [Source.Refresh],
// and reports the complete member list whenever it changed: best-ranked
// first, one per address, with the zone taken from a tag ("zone" by
// default) and Patroni's finer role kept in the TagRole tag. An
// [AllowList] limits the hosts it may report, so that whoever can write to
// the cluster's DCS cannot point the application's connections, and its
// password, elsewhere. While the API cannot be reached it reports nothing
// and the last topology stays in force.
//
// # Falling back
//
// A [Fallback] holds the local-first rules of pg_doorman's Patroni
// fallback as pure decisions on an injected time: when the local server
// fails, race the synchronous standbys, then the rest; keep the winner for
// a while; cool failed candidates down; try the local server again after
// its cooldown. The caller connects and reports what happened.
//
// A [LocalFirst] is that caller for a pool: it runs the discovery rounds
// a Fallback asks for, racing each wave's candidates through the pool's
// [Connector], shares one round among the callers told to discover at
// once, bounds their wait, cuts the fallback host's connections once they
// have lived the Lifetime, and records the fallback's metrics.
//
// # Concurrency and telemetry
//
// Client, Source, Fallback and LocalFirst are safe for concurrent use. A
// round of GET /cluster runs until its last caller has its answer or has
// given up; Source.Watch leaves no goroutine once its context ends; the
// Client's idle keep-alive connections stay until
// Client.CloseIdleConnections. LocalFirst starts its rounds and lifetime
// timers through LocalFirstConfig.Go, for the pool's Close to wait for,
// and they end with LocalFirstConfig.Life. Metrics go to an optional
// OpenTelemetry MeterProvider; logs go to an optional *slog.Logger, and
// repeated warnings are limited to one a minute.
// Passwords, including those in API URLs, never appear in errors or logs.
package patroni
