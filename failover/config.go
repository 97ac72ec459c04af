package failover

import (
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgfailover/pgfailover/failover/internal/connkeys"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/replica"
	"github.com/pgfailover/pgfailover/topology"
)

// Keys the Pool's own errors name when a setting fails at NewWithConfig;
// internal/connkeys holds every key's name.
const (
	keyFallbackLocal  = connkeys.FallbackLocal
	keyPatroniAPIURLs = connkeys.PatroniAPIURLs
)

// Config is built by ParseConfig; a Config made by hand is refused by
// NewWithConfig. Change fields of a parsed Config (or of its Copy) before
// passing it to NewWithConfig, not afterwards.
//
// Config has pgxpool's shape: it embeds the *pgxpool.Config that
// pgxpool.ParseConfig builds from the same string, less this package's
// keys, so code written for pgxpool keeps compiling once
// pgxpool.ParseConfig and pgxpool.NewWithConfig are swapped for
// ParseConfig and NewWithConfig:
//
//	cfg, err := failover.ParseConfig(connString)
//	cfg.MaxConns = 20
//	cfg.ConnConfig.Tracer = tracer
//	cfg.AfterConnect = registerTypes
//	pool, err := failover.NewWithConfig(ctx, cfg)
//
// Config's own Copy and ConnString take the place of pgxpool's; the
// embedded pgxpool.Config is reached as cfg.Config.
//
// The Pool builds one pgxpool per host from the embedded settings, so they
// apply to each host's pool on its own: MaxConns (pool_max_conns) = 10
// with three hosts allows up to 30 connections in all, and MinConns,
// MinIdleConns, MaxConnLifetime, MaxConnIdleTime and HealthCheckPeriod
// count per host as well. Each host's pool dials only its own host: its
// ConnConfig Host, Port and Fallbacks come from Hosts, not from the
// embedded ConnConfig, whose Host and Port are those of the first host and
// whose Fallbacks is nil.
//
// TLS: ConnConfig.TLSConfig, as it is when NewWithConfig is called (or when
// a topology source adds a host), applies to every host's first connection
// attempt, the way pgx applies it to its first host: replace it or edit it
// in place after ParseConfig and every host, including hosts a topology
// source adds later, is dialled with it. The one field that differs per
// host is ServerName: while it is empty or holds the name ParseConfig
// derived for the string's first host, each host gets its own (under
// sslmode=verify-full, the name its certificate is checked against); any
// other ServerName set in code is used for every host. A TLSConfig set to nil dials without TLS, as in
// pgx. The later TLS variants sslmode gives (pgconn's Fallbacks: the plain
// attempt of prefer, the TLS one of allow) stay as ParseConfig derived
// them.
//
// Hooks: BeforeConnect, AfterRelease, BeforeClose and ShouldPing reach
// every host's pool unchanged (BeforeConnect also runs before the Pool's
// health-probe connections, so rotated credentials apply to them). The
// Pool installs its own ConnConfig.ValidateConnect, the role check that
// takes the place of pgconn's target_session_attrs check; a
// ValidateConnect set here is not called. It wraps AfterConnect and
// PrepareConn with hooks of its own that call the ones set here (or, when
// PrepareConn is nil, the deprecated BeforeAcquire).
type Config struct {
	// Config holds pgx's and pgxpool's settings: credentials, TLS, runtime
	// parameters, the pool_* settings and the hooks, as described above.
	*pgxpool.Config

	// Hosts are the servers of the connection string in the order written,
	// without repeats: a host:port that appears twice keeps its first place.
	Hosts []HostConfig

	// Target says which role a connection must reach. It is TargetPrimary
	// when the connection string names none.
	Target hosthealth.Target

	// Zone is the client's own zone ("zone" key), "" when unset.
	Zone string

	// The fields below hold the connection-string key each names;
	// ParseConfig's documentation gives its meaning, default and range.
	// NewWithConfig refuses a value set in code outside that range.

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

	MeterProvider  metric.MeterProvider // nil means the otel global provider
	TracerProvider trace.TracerProvider // nil means the otel global provider
	Logger         *slog.Logger         // nil means silent

	// Topology, when set, tells the Pool of hosts beyond the connection
	// string's, and of their claimed roles and zones, as they come and go.
	// Its members are merged with the connection string's hosts, which
	// always stay. Nil means the connection string's hosts, plus Patroni's
	// members when the string sets patroni_api_urls: NewWithConfig then
	// builds that source itself (a Topology set in code takes its place,
	// and patroni_api_urls is not read).
	Topology topology.Source

	// clock is the Pool's time source; nil means the wall clock.
	clock clock.Clock

	// connString is the string the caller passed to ParseConfig. pgx may
	// have been given a rewritten one (see
	// connstr.Result.WithoutTargetSessionAttrs), so
	// Config.Config.ConnString() (pgxpool's) is not always the same.
	connString string

	// Replica holds how the Reader routes reads (see Reader).
	Replica ReplicaConfig

	// patroni holds the patroni_*, fallback_* and query_wait_timeout
	// settings. They are set from the connection string only; Topology
	// takes a source built in code.
	patroni connkeys.Patroni

	// templateTLS holds the connection variants pgconn derived for the
	// string's first host (or its default host when it names none): hosts
	// only a topology source names are dialled with the same ones.
	templateTLS []*pgconn.FallbackConfig

	// parsedServerName is the TLS server name ParseConfig derived for the
	// string's first host. A ConnConfig.TLSConfig that still holds it gets
	// each host's own name (hostpool.Dialing's tlsFor); any other name was set in code.
	parsedServerName string

	// tcpUserTimeout is tcp_user_timeout, default 10s, 0 for the OS
	// default. ParseConfig's DialFunc applies it; it is kept for tests.
	tcpUserTimeout time.Duration
	// probeConnectTimeout bounds a probe's connect when connect_timeout
	// is 0 (no limit): 5s, set by ParseConfig.
	probeConnectTimeout time.Duration

	createdByParseConfig bool
}

// ReplicaConfig is how the Reader routes reads.
type ReplicaConfig struct {
	// Each field holds the connection-string key it names; ParseConfig's
	// documentation gives its meaning, default and range.

	PinAfterWrite time.Duration // pin_after_write
	MaxLag        time.Duration // max_lag
	// Wait is replica_wait. Its default comes from measurement: a replica
	// streaming from a primary nearby replayed a commit 0.24ms after the
	// commit returned at the median, 2.9ms at p99 and 11ms at most (300
	// commits, a loaded 2-core machine); 20ms covers that with room to
	// spare.
	Wait time.Duration
	// OutageReads is outage_reads: replica.OutageReplica or
	// replica.OutageWait.
	OutageReads replica.OutageReads
}

// check reports a setting set in code out of the range ParseConfig
// enforces for its key, naming the key: NewWithConfig runs it on the
// Config it is given.
func (c *Config) check() error {
	switch {
	case c.MaxAttempts < 1:
		return &ConfigError{Key: connkeys.MaxAttempts, Msg: fmt.Sprintf("MaxAttempts is %d: at least 1 attempt is needed", c.MaxAttempts)}
	case c.MaxDuration <= 0:
		return &ConfigError{Key: connkeys.MaxDuration, Msg: fmt.Sprintf("MaxDuration is %v: it must be positive", c.MaxDuration)}
	case c.BackoffInitial <= 0:
		return &ConfigError{Key: connkeys.BackoffInitial, Msg: fmt.Sprintf("BackoffInitial is %v: it must be positive", c.BackoffInitial)}
	case c.BackoffMax < c.BackoffInitial:
		return &ConfigError{Key: connkeys.BackoffMax, Msg: fmt.Sprintf("BackoffMax is %v, less than %s (BackoffInitial, %v)", c.BackoffMax, connkeys.BackoffInitial, c.BackoffInitial)}
	case c.HealthProbeInterval <= 0:
		return &ConfigError{Key: connkeys.HealthProbeInterval, Msg: fmt.Sprintf("HealthProbeInterval is %v: it must be positive", c.HealthProbeInterval)}
	case c.HealthProbeTimeout <= 0:
		return &ConfigError{Key: connkeys.HealthProbeTimeout, Msg: fmt.Sprintf("HealthProbeTimeout is %v: it must be positive", c.HealthProbeTimeout)}
	case c.ReadyConns < 0:
		return &ConfigError{Key: connkeys.ReadyConns, Msg: fmt.Sprintf("ReadyConns is %d, negative: 0 opens none", c.ReadyConns)}
	case c.HealthProbeWaitMax < probe.Floor:
		return &ConfigError{Key: connkeys.HealthProbeWaitMax, Msg: fmt.Sprintf("HealthProbeWaitMax is %v, less than %v, the shortest interval between probes", c.HealthProbeWaitMax, probe.Floor)}
	case c.HealthProbeWaitMax > c.HealthProbeInterval:
		return &ConfigError{Key: connkeys.HealthProbeWaitMax, Msg: fmt.Sprintf("HealthProbeWaitMax is %v, greater than %s (HealthProbeInterval, %v)", c.HealthProbeWaitMax, connkeys.HealthProbeInterval, c.HealthProbeInterval)}
	case c.NameRecheckInterval < 0:
		return &ConfigError{Key: connkeys.NameRecheckInterval, Msg: fmt.Sprintf("NameRecheckInterval is %v, negative: 0 opens none", c.NameRecheckInterval)}
	}
	return c.Replica.check(c.HealthProbeInterval)
}

// check reports a setting out of range, naming its key.
func (r ReplicaConfig) check(probeInterval time.Duration) error {
	switch {
	case r.PinAfterWrite < 0:
		return &ConfigError{Key: connkeys.PinAfterWrite, Msg: "must not be negative"}
	case r.MaxLag < 0:
		return &ConfigError{Key: connkeys.MaxLag, Msg: "must not be negative"}
	case r.Wait < 0:
		return &ConfigError{Key: connkeys.ReplicaWait, Msg: "must not be negative"}
	case r.MaxLag > 0 && r.MaxLag <= probeInterval:
		return &ConfigError{Key: connkeys.MaxLag, Msg: "must be greater than " + connkeys.HealthProbeInterval + " (" + probeInterval.String() + "), or 0 for no gate"}
	case r.OutageReads > replica.OutageWait:
		return &ConfigError{Key: connkeys.OutageReads, Msg: "is " + r.OutageReads.String() + ": must be replica or wait"}
	}
	return nil
}

// HostConfig is one server from the connection string.
type HostConfig struct {
	Host string // host name, IP address or unix socket directory
	Port uint16
	Zone string // from zones=, "" when not given

	// tls holds every connection variant pgconn derived for this host, in
	// pgconn's order: one entry normally, two with sslmode=prefer (TLS, then
	// plain) or sslmode=allow (plain, then TLS). Each variant's TLSConfig was
	// built for this host, so its ServerName is this host's name.
	tls []*pgconn.FallbackConfig
}

// Addr returns host:port, with brackets around an IPv6 address. It is the
// label used for the host in errors and metrics. It never holds credentials.
func (h HostConfig) Addr() string {
	return net.JoinHostPort(h.Host, strconv.FormatUint(uint64(h.Port), 10))
}

// Copy returns a copy of c that can be changed without touching c: the
// embedded pgxpool.Config (with its ConnConfig, RuntimeParams and TLS
// settings), the Hosts and their TLS variants are all copied. Providers and the Logger are
// shared, as they are meant to be.
func (c *Config) Copy() *Config {
	if c == nil {
		return nil
	}
	n := *c
	if c.Config != nil {
		n.Config = c.Config.Copy()
	}
	if c.Hosts != nil {
		n.Hosts = make([]HostConfig, len(c.Hosts))
		for i, h := range c.Hosts {
			n.Hosts[i] = copyHost(h)
		}
	}
	n.patroni.APIURLs = slices.Clone(c.patroni.APIURLs)
	n.templateTLS = copyHost(HostConfig{tls: c.templateTLS}).tls
	return &n
}

// ConnString returns the connection string given to ParseConfig, exactly as
// it was passed (password included).
func (c *Config) ConnString() string { return c.connString }
