package connkeys

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/connstr"
	"github.com/pgfailover/pgfailover/internal/netconn"
	"github.com/pgfailover/pgfailover/patroni"
	"github.com/pgfailover/pgfailover/replica"
)

// Defaults of the keys. [Read] is the only place that applies them. Those
// of the patroni_*, fallback_* and query_wait_timeout keys are the patroni
// package's (patroni.DefaultRefreshInterval and the rest), written there
// once for the Pool and for callers of that package alike; that of
// tcp_user_timeout is netconn.DefaultTCPUserTimeout, beside the dialer
// that applies it. failover_ready_conns defaults to pool_max_conns.
const (
	DefaultMaxAttempts         = 8
	DefaultMaxDuration         = 30 * time.Second
	DefaultBackoffInitial      = 50 * time.Millisecond
	DefaultBackoffMax          = time.Second
	DefaultHealthProbeInterval = time.Second
	DefaultHealthProbeTimeout  = 3 * time.Second
	DefaultHealthProbeWaitMax  = 50 * time.Millisecond
	DefaultNameRecheckInterval = 50 * time.Millisecond
	DefaultPinAfterWrite       = time.Second
	DefaultMaxLag              = 0
	DefaultReplicaWait         = 20 * time.Millisecond

	// DefaultConnectTimeout bounds each connection attempt (dial, TLS and
	// startup, per host) when nothing sets connect_timeout, pgx's key.
	// Without it pgconn waits as long as the caller's context allows, and
	// one host that drops packets would eat a whole failover walk. It also
	// bounds a health probe's connect under connect_timeout=0.
	DefaultConnectTimeout = 5 * time.Second
)

// Settings are the values of the keys, checked, defaults filled in. Each
// field holds the key it names; failover.ParseConfig's doc comment gives
// its meaning, default and range.
type Settings struct {
	Target hosthealth.Target // target, target_session_attrs
	Zone   string            // zone
	// Zones is zones= split at its commas, nil when the key is unset;
	// [Settings.HostZones] matches it to the hosts.
	Zones []string

	MaxAttempts         int           // failover_max_attempts
	ReadyConns          int           // failover_ready_conns
	MaxDuration         time.Duration // failover_max_duration
	BackoffInitial      time.Duration // failover_backoff_initial
	BackoffMax          time.Duration // failover_backoff_max
	HealthProbeInterval time.Duration // health_probe_interval
	HealthProbeWaitMax  time.Duration // health_probe_wait_max
	NameRecheckInterval time.Duration // name_recheck_interval
	HealthProbeTimeout  time.Duration // health_probe_timeout
	LazyConnect         bool          // lazy_connect
	TCPUserTimeout      time.Duration // tcp_user_timeout, 0 for the operating system's default

	Replica Replica
	Patroni Patroni
}

// Replica holds the keys of the Reader's routing. Its fields are
// failover.ReplicaConfig's, in the same order, so that one converts to
// the other.
type Replica struct {
	PinAfterWrite time.Duration       // pin_after_write
	MaxLag        time.Duration       // max_lag
	Wait          time.Duration       // replica_wait
	OutageReads   replica.OutageReads // outage_reads
}

// Patroni holds the patroni_*, fallback_* and query_wait_timeout keys.
type Patroni struct {
	APIURLs                []string          // patroni_api_urls, http or https URLs with a host
	Refresh                time.Duration     // patroni_refresh_interval
	Allowed                patroni.AllowList // patroni_allowed_hosts; the zero value allows every member
	ZoneTag                string            // patroni_zone_tag
	QueryWait              time.Duration     // query_wait_timeout
	FallbackLocal          bool              // fallback_local; false without patroni_api_urls
	FallbackConnectTimeout time.Duration     // fallback_connect_timeout
	FallbackCooldown       time.Duration     // fallback_cooldown
	FallbackLifetime       time.Duration     // fallback_lifetime
}

// defaults returns the Settings of a string that sets none of the keys.
// maxConns is pool_max_conns, failover_ready_conns's default.
func defaults(maxConns int) Settings {
	return Settings{
		Target:              hosthealth.TargetPrimary,
		MaxAttempts:         DefaultMaxAttempts,
		ReadyConns:          maxConns,
		MaxDuration:         DefaultMaxDuration,
		BackoffInitial:      DefaultBackoffInitial,
		BackoffMax:          DefaultBackoffMax,
		HealthProbeInterval: DefaultHealthProbeInterval,
		HealthProbeTimeout:  DefaultHealthProbeTimeout,
		HealthProbeWaitMax:  DefaultHealthProbeWaitMax,
		NameRecheckInterval: DefaultNameRecheckInterval,
		TCPUserTimeout:      netconn.DefaultTCPUserTimeout,
		Replica: Replica{
			PinAfterWrite: DefaultPinAfterWrite,
			MaxLag:        DefaultMaxLag,
			Wait:          DefaultReplicaWait,
		},
		Patroni: Patroni{
			Refresh:                patroni.DefaultRefreshInterval,
			ZoneTag:                patroni.DefaultZoneTag,
			QueryWait:              patroni.DefaultQueryWaitTimeout,
			FallbackConnectTimeout: patroni.DefaultFallbackConnect,
			FallbackCooldown:       patroni.DefaultFallbackCooldown,
			FallbackLifetime:       patroni.DefaultFallbackLifetime,
		},
	}
}

// Read checks the keys in own (what [Take] took from RuntimeParams) and
// the effective target_session_attrs tsa, and returns the Settings they
// give over the defaults. maxConns is pool_max_conns. The keys are checked
// in a fixed order, so that of two bad values the same one is always
// reported; zones= is matched to the hosts later ([Settings.HostZones]).
func Read(own map[string]string, tsa connstr.TargetSessionAttrs, maxConns int) (Settings, *Error) {
	s := defaults(maxConns)
	r := reader(own)
	var err *Error
	if s.Target, err = r.target(tsa, s.Target); err != nil {
		return Settings{}, err
	}
	if err = r.budget(&s); err != nil {
		return Settings{}, err
	}
	if s.HealthProbeInterval, err = r.duration(HealthProbeInterval, s.HealthProbeInterval, positive); err != nil {
		return Settings{}, err
	}
	if s.HealthProbeTimeout, err = r.duration(HealthProbeTimeout, s.HealthProbeTimeout, positive); err != nil {
		return Settings{}, err
	}
	if s.HealthProbeWaitMax, err = r.probeWaitMax(s.HealthProbeWaitMax, s.HealthProbeInterval); err != nil {
		return Settings{}, err
	}
	if s.NameRecheckInterval, err = r.duration(NameRecheckInterval, s.NameRecheckInterval, nonNegative); err != nil {
		return Settings{}, err
	}
	if err = r.replica(&s.Replica, s.HealthProbeInterval); err != nil {
		return Settings{}, err
	}
	if err = r.patroni(&s.Patroni); err != nil {
		return Settings{}, err
	}
	s.Patroni.FallbackLocal = s.Patroni.FallbackLocal && len(s.Patroni.APIURLs) > 0
	if s.TCPUserTimeout, err = r.tcpUserTimeout(s.TCPUserTimeout); err != nil {
		return Settings{}, err
	}
	if s.LazyConnect, err = r.onOff(LazyConnect, s.LazyConnect); err != nil {
		return Settings{}, err
	}
	s.Zone = own[Zone]
	if z, ok := own[Zones]; ok {
		s.Zones = strings.Split(z, ",")
	}
	return s, nil
}

// HostZones returns the zone of each of n hosts, in their order, from
// zones=: one zone per host, or a single one for all of them ("a,,b"
// leaves the second host without a zone). It returns nil when zones= is
// unset.
func (s Settings) HostZones(n int) ([]string, *Error) {
	switch {
	case s.Zones == nil:
		return nil, nil
	case len(s.Zones) == 1:
		out := make([]string, n)
		for i := range out {
			out[i] = s.Zones[0]
		}
		return out, nil
	case len(s.Zones) == n:
		return slices.Clone(s.Zones), nil
	}
	return nil, fail(Zones, fmt.Sprintf("%d zones given for %d hosts; give one zone for every host, or a single zone for all", len(s.Zones), n), nil)
}
