package connkeys

import (
	"slices"
	"strings"
)

// The keys of package failover. pgconn does not know them, so it files them
// under ConnConfig.RuntimeParams; [Take] takes them out again before
// anything can send them to a server.
const (
	Target                 = "target"
	Zone                   = "zone"
	Zones                  = "zones"
	MaxAttempts            = "failover_max_attempts"
	ReadyConns             = "failover_ready_conns"
	MaxDuration            = "failover_max_duration"
	BackoffInitial         = "failover_backoff_initial"
	BackoffMax             = "failover_backoff_max"
	HealthProbeInterval    = "health_probe_interval"
	HealthProbeTimeout     = "health_probe_timeout"
	HealthProbeWaitMax     = "health_probe_wait_max"
	NameRecheckInterval    = "name_recheck_interval"
	PinAfterWrite          = "pin_after_write"
	MaxLag                 = "max_lag"
	ReplicaWait            = "replica_wait"
	OutageReads            = "outage_reads"
	PatroniAPIURLs         = "patroni_api_urls"
	PatroniRefresh         = "patroni_refresh_interval"
	PatroniAllowedHosts    = "patroni_allowed_hosts"
	PatroniZoneTag         = "patroni_zone_tag"
	QueryWaitTimeout       = "query_wait_timeout"
	FallbackLocal          = "fallback_local"
	LazyConnect            = "lazy_connect"
	FallbackConnectTimeout = "fallback_connect_timeout"
	FallbackCooldown       = "fallback_cooldown"
	FallbackLifetime       = "fallback_lifetime"

	// TCPUserTimeout is libpq's key, which pgconn does not implement: it
	// would send it to the server as a runtime parameter, setting the
	// server's side of the socket instead of the client's.
	TCPUserTimeout = "tcp_user_timeout"

	// FallbackPrefix marks the whole fallback_* family as ours. A key with
	// this prefix that is not one of the Fallback* names is an error, so a
	// misspelling is reported instead of being dropped or sent to the
	// server.
	FallbackPrefix = "fallback_"

	// TargetSessionAttrs is libpq's key. pgconn parses it itself, so it
	// never shows up in RuntimeParams; [Read] takes its value from the
	// scan of the string ([connstr.Result.TargetSessionAttrs]).
	TargetSessionAttrs = "target_session_attrs"
)

// own lists the keys, fallback_* aside, that [Take] takes out of
// RuntimeParams.
var own = []string{
	Target,
	Zone,
	Zones,
	MaxAttempts,
	ReadyConns,
	MaxDuration,
	BackoffInitial,
	BackoffMax,
	HealthProbeInterval,
	HealthProbeTimeout,
	HealthProbeWaitMax,
	NameRecheckInterval,
	PinAfterWrite,
	MaxLag,
	ReplicaWait,
	OutageReads,
	PatroniAPIURLs,
	PatroniRefresh,
	PatroniAllowedHosts,
	PatroniZoneTag,
	QueryWaitTimeout,
	TCPUserTimeout,
	LazyConnect,
}

// fallback lists the known members of the fallback_* family, in the order
// the message for an unknown one names them.
var fallback = []string{
	FallbackLocal,
	FallbackConnectTimeout,
	FallbackCooldown,
	FallbackLifetime,
}

// Names returns every key failover.ParseConfig takes:
// target_session_attrs, then the keys [Take] removes, the fallback_* family
// last.
func Names() []string {
	return slices.Concat([]string{TargetSessionAttrs}, own, fallback)
}

// Ours reports whether key belongs to package failover: one of its keys,
// or any key of the fallback_* family (an unknown one is [Read]'s error).
// target_session_attrs is libpq's and pgconn's as well, so it is not.
func Ours(key string) bool {
	return slices.Contains(own, key) || strings.HasPrefix(key, FallbackPrefix)
}

// Take removes every key of ours from params (pgconn's RuntimeParams) and
// returns them with their values, so that none reaches a server as a
// runtime parameter.
func Take(params map[string]string) map[string]string {
	taken := make(map[string]string)
	for k, v := range params {
		if Ours(k) {
			taken[k] = v
			delete(params, k)
		}
	}
	return taken
}
