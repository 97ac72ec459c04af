package failover

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgservicefile"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// Connection-string keys owned by this package. pgconn does not know them,
// so it files them under ConnConfig.RuntimeParams; ParseConfig takes them out
// again before anything can send them to a server.
const (
	keyTarget                 = "target"
	keyZone                   = "zone"
	keyZones                  = "zones"
	keyMaxAttempts            = "failover_max_attempts"
	keyMaxDuration            = "failover_max_duration"
	keyBackoffInitial         = "failover_backoff_initial"
	keyBackoffMax             = "failover_backoff_max"
	keyHealthProbeInterval    = "health_probe_interval"
	keyPinAfterWrite          = "pin_after_write"
	keyMaxLag                 = "max_lag"
	keyPatroniAPIURLs         = "patroni_api_urls"
	keyPatroniRefresh         = "patroni_refresh_interval"
	keyFallbackConnectTimeout = "fallback_connect_timeout"
	keyFallbackCooldown       = "fallback_cooldown"
	keyFallbackLifetime       = "fallback_lifetime"

	// fallbackKeyPrefix marks the whole fallback_* family as ours. A key with
	// this prefix that is not one of the keyFallback* names is an error, so a
	// misspelling is reported instead of being dropped or sent to the server.
	fallbackKeyPrefix = "fallback_"

	// keyTargetSessionAttrs is libpq's key. pgconn parses it itself, so it
	// never shows up in RuntimeParams; ParseConfig reads it from the string.
	keyTargetSessionAttrs = "target_session_attrs"

	// Environment variables that libpq and pgconn read; ParseConfig looks at
	// them only to tell what pgconn will do.
	envTargetSessionAttrs = "PGTARGETSESSIONATTRS"
	envConnectTimeout     = "PGCONNECT_TIMEOUT"
	envService            = "PGSERVICE"
	envServiceFile        = "PGSERVICEFILE"
)

// ownKeys lists this package's keys, fallback_* aside, in the order
// ParseConfig checks them. Error messages therefore come out in a fixed order.
var ownKeys = []string{
	keyTarget,
	keyZone,
	keyZones,
	keyMaxAttempts,
	keyMaxDuration,
	keyBackoffInitial,
	keyBackoffMax,
	keyHealthProbeInterval,
	keyPinAfterWrite,
	keyMaxLag,
	keyPatroniAPIURLs,
	keyPatroniRefresh,
}

// fallbackKeys are the known members of the fallback_* family.
var fallbackKeys = []string{
	keyFallbackConnectTimeout,
	keyFallbackCooldown,
	keyFallbackLifetime,
}

// Defaults. ParseConfig is the only place that applies them.
const (
	defaultMaxAttempts            = 8
	defaultMaxDuration            = 30 * time.Second
	defaultBackoffInitial         = 50 * time.Millisecond
	defaultBackoffMax             = time.Second
	defaultHealthProbeInterval    = time.Second
	defaultPinAfterWrite          = time.Second
	defaultMaxLag                 = 0
	defaultPatroniRefresh         = 5 * time.Second
	defaultFallbackConnectTimeout = 5 * time.Second
	defaultFallbackCooldown       = 30 * time.Second
	defaultFallbackLifetime       = 30 * time.Second

	// defaultConnectTimeout bounds each connection attempt (dial, TLS and
	// startup, per host) when nothing sets connect_timeout. Without it pgconn
	// waits as long as the caller's context allows, and one host that drops
	// packets would eat a whole failover walk.
	defaultConnectTimeout = 5 * time.Second
)

// Config is built by ParseConfig; a Config made by hand is refused by
// NewWithConfig. Change fields of a parsed Config (or of its Copy) before
// passing it to NewWithConfig, not afterwards.
type Config struct {
	// PoolConfig is the pgxpool template applied to every host: credentials,
	// TLS, runtime params, pool_* settings and hooks. Its ConnConfig.Host and
	// Port are those of the first host and ConnConfig.Fallbacks is nil: the
	// Pool builds one pgxpool per host, each from hostPoolConfig.
	// ConnConfig.ValidateConnect is nil; the Pool installs its own role check
	// instead of pgconn's target_session_attrs check.
	PoolConfig *pgxpool.Config

	// Hosts are the servers of the connection string in the order written,
	// without repeats: a host:port that appears twice keeps its first place.
	Hosts []Host

	// Target says which role a connection must reach. It is TargetPrimary
	// when the connection string names none.
	Target hosthealth.Target

	// Zone is the client's own zone ("zone" key), "" when unset.
	Zone string

	MaxAttempts         int           // failover_max_attempts, default 8, at least 1
	MaxDuration         time.Duration // failover_max_duration, default 30s, > 0
	BackoffInitial      time.Duration // failover_backoff_initial, default 50ms, > 0
	BackoffMax          time.Duration // failover_backoff_max, default 1s, >= BackoffInitial
	HealthProbeInterval time.Duration // health_probe_interval, default 1s, > 0
	PinAfterWrite       time.Duration // pin_after_write, default 1s, >= 0 (0 turns it off)
	MaxLag              time.Duration // max_lag, default 0 (no gate); when > 0 it must be > HealthProbeInterval

	MeterProvider  metric.MeterProvider // nil means the otel global provider
	TracerProvider trace.TracerProvider // nil means the otel global provider
	Logger         *slog.Logger         // nil means silent

	// connString is the string the caller passed to ParseConfig. pgx may
	// have been given a rewritten one (see rewriteConnString), so
	// PoolConfig.ConnString() is not always the same.
	connString string

	// Reserved for the Patroni topology source.
	patroniAPIURLs         []string
	patroniRefresh         time.Duration
	fallbackConnectTimeout time.Duration
	fallbackCooldown       time.Duration
	fallbackLifetime       time.Duration

	createdByParseConfig bool
}

// Host is one server from the connection string.
type Host struct {
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
func (h Host) Addr() string {
	return net.JoinHostPort(h.Host, strconv.FormatUint(uint64(h.Port), 10))
}

// copyHost returns h with its own copies of the TLS variants.
func copyHost(h Host) Host {
	if h.tls != nil {
		variants := make([]*pgconn.FallbackConfig, len(h.tls))
		for i, v := range h.tls {
			variants[i] = copyFallback(v)
		}
		h.tls = variants
	}
	return h
}

func copyFallback(v *pgconn.FallbackConfig) *pgconn.FallbackConfig {
	if v == nil {
		return nil
	}
	c := *v
	if c.TLSConfig != nil {
		c.TLSConfig = c.TLSConfig.Clone()
	}
	return &c
}

// ConfigError reports a connection string that ParseConfig cannot use.
// Error() names the key at fault and never contains the connection string
// or a password.
type ConfigError struct {
	// Key is the connection-string key at fault. It is "" when pgx itself
	// rejected the string; Msg then carries pgx's explanation, which names
	// the key when pgx knows it.
	Key string
	// Msg says what is wrong. It has been checked for the password.
	Msg string
	// Err is the underlying cause, if any, for errors.Is and errors.As; its
	// text is not part of Error(). When pgx rejected the string, Err is
	// pgx's *pgconn.ParseConfigError with its ConnString field cleared.
	Err error
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("pgfailover: invalid connection string: ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *ConfigError) Unwrap() error { return e.Err }

// ParseConfig builds a Config from a connection string in either of libpq's
// forms, a URL or keyword/value pairs:
//
//	postgres://app:secret@db-a:5432,db-b:5432,db-c:5432/app?target=primary&zone=eu-1a
//	host=db-a,db-b,db-c port=5432 user=app dbname=app target=primary zone=eu-1a
//
// Every key pgx and pgxpool know keeps its meaning: host and port lists
// (host=a,b port=5432,5433, or a:5432,b:5433 in a URL), dbname, user,
// password, passfile, sslmode and the other ssl* keys, connect_timeout,
// service, application_name and other runtime parameters,
// statement_cache_capacity, default_query_exec_mode, and the pool keys
// pool_max_conns, pool_min_conns, pool_min_idle_conns,
// pool_max_conn_lifetime, pool_max_conn_lifetime_jitter,
// pool_max_conn_idle_time, pool_health_check_period and pool_ping_timeout.
// The pool_* keys apply to each host's pool on its own: pool_max_conns=10
// with three hosts allows up to 30 connections in all. The PG* environment
// variables and the service file count as they do for pgx.
//
// The keys below belong to this package. ParseConfig removes them, so none
// of them ever reaches a server as a runtime parameter:
//
//	key                       default     meaning
//	target_session_attrs      read-write  libpq's key: which role to connect to (see below)
//	target                    read-write  the same, shorter; may not disagree with target_session_attrs
//	zone                      ""          the client's zone; hosts in it are tried first
//	zones                     ""          comma list, one zone per host, positional like port=
//	                                      (a single value applies to every host; "a,,b" leaves
//	                                      the second host without a zone)
//	failover_max_attempts     8           attempts per call, first one included; at least 1
//	failover_max_duration     30s         time one call may spend failing over; > 0
//	failover_backoff_initial  50ms        first backoff base between rounds; > 0
//	failover_backoff_max      1s          largest backoff base; >= failover_backoff_initial
//	                                      (when unset it is raised to failover_backoff_initial
//	                                      if that is larger than 1s)
//	health_probe_interval     1s          period of the role and lag probes; > 0
//	pin_after_write           1s          reads go to the primary for this long after a
//	                                      write (read-your-writes); 0 turns it off
//	max_lag                   0           largest staleness a replica may serve reads with;
//	                                      0 = no gate; otherwise > health_probe_interval
//	patroni_api_urls          ""          reserved for the Patroni topology source: comma
//	                                      list of http or https URLs of the Patroni REST API
//	patroni_refresh_interval  5s          reserved for the Patroni topology source; > 0
//	fallback_connect_timeout  5s          reserved for the Patroni topology source; > 0
//	fallback_cooldown         30s         reserved for the Patroni topology source; > 0
//	fallback_lifetime         30s         reserved for the Patroni topology source; > 0
//
// Any other key starting with fallback_ is an error. Durations are written
// in Go syntax ("250ms", "2s", "1m30s") or as a bare whole number of
// milliseconds ("250"). Keys are case-sensitive, as in pgx.
//
// Targets: any; read-write or primary; read-only, standby or replica;
// prefer-standby or prefer-replica. When the string names none, the
// target is read-write, which differs from libpq's "any". As with libpq,
// target_session_attrs may also come from a service file or from the
// PGTARGETSESSIONATTRS environment variable, in that order of precedence
// below the connection string itself; a target= key overrides the
// environment variable without conflict. pgconn's own target_session_attrs
// check is not used: it would reject the extra spellings and does not know
// the Pool's ranking, so ParseConfig keeps it from pgconn and leaves
// ConnConfig.ValidateConnect nil.
//
// connect_timeout: when neither the string, a service file nor
// PGCONNECT_TIMEOUT sets it, ParseConfig sets ConnConfig.ConnectTimeout to
// 5s, so a host that silently drops packets cannot stall a walk over the
// hosts. connect_timeout=0 keeps libpq's meaning of no limit. The timeout
// covers one host (its TLS and plain attempts together); name resolution
// runs under the caller's context.
//
// Errors are *ConfigError values. They name the key and the bad value, and
// never contain the connection string or the password.
func ParseConfig(connString string) (*Config, error) {
	scan, scanErr := scanConnString(connString)
	p := &parseState{secrets: scan.secrets()}

	if scanErr != nil {
		// The scanner follows pgconn's grammar, so pgx rejects the string
		// too and its message is the more precise one.
		if _, err := pgxpool.ParseConfig(connString); err != nil {
			return nil, p.pgxError(err)
		}
		return nil, p.fail("", scanErr.Error(), nil)
	}

	tsa := p.findTargetSessionAttrs(scan)
	pgxString := rewriteConnString(connString, scan, tsa.fromEnv || tsa.fromService)
	poolConfig, err := pgxpool.ParseConfig(pgxString)
	if err != nil {
		return nil, p.pgxError(err)
	}
	cc := poolConfig.ConnConfig
	p.secrets = append(p.secrets, cc.Password)

	// Take every key of ours out of RuntimeParams before anything else, so
	// none can be left behind by an early return.
	own := make(map[string]string)
	for k, v := range cc.RuntimeParams {
		if slices.Contains(ownKeys, k) || strings.HasPrefix(k, fallbackKeyPrefix) {
			own[k] = v
			delete(cc.RuntimeParams, k)
		}
	}

	c := &Config{
		PoolConfig:             poolConfig,
		Target:                 hosthealth.TargetPrimary,
		MaxAttempts:            defaultMaxAttempts,
		MaxDuration:            defaultMaxDuration,
		BackoffInitial:         defaultBackoffInitial,
		BackoffMax:             defaultBackoffMax,
		HealthProbeInterval:    defaultHealthProbeInterval,
		PinAfterWrite:          defaultPinAfterWrite,
		MaxLag:                 defaultMaxLag,
		connString:             connString,
		patroniRefresh:         defaultPatroniRefresh,
		fallbackConnectTimeout: defaultFallbackConnectTimeout,
		fallbackCooldown:       defaultFallbackCooldown,
		fallbackLifetime:       defaultFallbackLifetime,
		createdByParseConfig:   true,
	}

	if err := p.applyTarget(c, own, tsa); err != nil {
		return nil, err
	}
	if err := p.applyBudget(c, own); err != nil {
		return nil, err
	}
	if err := p.applyReplicaSettings(c, own); err != nil {
		return nil, err
	}
	if err := p.applyPatroni(c, own); err != nil {
		return nil, err
	}
	c.Zone = own[keyZone]

	// The Pool checks roles itself; pgconn's check must stay out of the way.
	cc.ValidateConnect = nil
	if !scan.connectTimeoutSet() {
		cc.ConnectTimeout = defaultConnectTimeout
	}

	hosts := splitHosts(&cc.Config)
	if z, ok := own[keyZones]; ok {
		zones := strings.Split(z, ",")
		switch {
		case len(zones) == 1:
			for i := range hosts {
				hosts[i].Zone = zones[0]
			}
		case len(zones) == len(hosts):
			for i := range hosts {
				hosts[i].Zone = zones[i]
			}
		default:
			return nil, p.fail(keyZones, fmt.Sprintf("%d zones given for %d hosts; give one zone for every host, or a single zone for all", len(zones), len(hosts)), nil)
		}
	}
	c.Hosts = dedupHosts(hosts)

	// Each host's pool gets its own Host, Port, TLS and fallbacks from
	// hostPoolConfig; the template keeps the first host's for reference.
	cc.Fallbacks = nil
	return c, nil
}

// splitHosts turns pgconn's flat list of connection variants (the main
// config, then Fallbacks) into one Host per host of the connection string.
// pgconn lists the variants of one host next to each other, at most one with
// TLS and one without, so a variant starts a new Host when its host:port
// differs from the previous one or when the current Host already has a
// variant of the same kind. The second rule keeps "host=a,a" as two entries.
func splitHosts(cc *pgconn.Config) []Host {
	variants := make([]*pgconn.FallbackConfig, 0, 1+len(cc.Fallbacks))
	variants = append(variants, &pgconn.FallbackConfig{Host: cc.Host, Port: cc.Port, TLSConfig: cc.TLSConfig})
	variants = append(variants, cc.Fallbacks...)

	var hosts []Host
	for _, v := range variants {
		if n := len(hosts); n > 0 {
			last := &hosts[n-1]
			sameKind := slices.ContainsFunc(last.tls, func(w *pgconn.FallbackConfig) bool {
				return (w.TLSConfig == nil) == (v.TLSConfig == nil)
			})
			if last.Host == v.Host && last.Port == v.Port && !sameKind {
				last.tls = append(last.tls, v)
				continue
			}
		}
		hosts = append(hosts, Host{Host: v.Host, Port: v.Port, tls: []*pgconn.FallbackConfig{v}})
	}
	return hosts
}

// dedupHosts keeps the first Host of each host:port.
func dedupHosts(hosts []Host) []Host {
	seen := make(map[string]bool, len(hosts))
	out := hosts[:0]
	for _, h := range hosts {
		if seen[h.Addr()] {
			continue
		}
		seen[h.Addr()] = true
		out = append(out, h)
	}
	return slices.Clip(out)
}

// Copy returns a copy of c that can be changed without touching c: the
// PoolConfig (with its ConnConfig, RuntimeParams and TLS settings), the
// Hosts and their TLS variants are all copied. Providers and the Logger are
// shared, as they are meant to be.
func (c *Config) Copy() *Config {
	if c == nil {
		return nil
	}
	n := *c
	if c.PoolConfig != nil {
		n.PoolConfig = c.PoolConfig.Copy()
	}
	if c.Hosts != nil {
		n.Hosts = make([]Host, len(c.Hosts))
		for i, h := range c.Hosts {
			n.Hosts[i] = copyHost(h)
		}
	}
	n.patroniAPIURLs = slices.Clone(c.patroniAPIURLs)
	return &n
}

// ConnString returns the connection string given to ParseConfig, exactly as
// it was passed (password included).
func (c *Config) ConnString() string { return c.connString }

// hostPoolConfig returns the pgxpool config for host i: a copy of
// PoolConfig whose ConnConfig Host, Port and TLSConfig are those of the
// first TLS variant of Hosts[i] and whose Fallbacks are that same host's
// other variants, so a pool never dials a host other than its own.
//
// A Host without variants (one added to Hosts by hand) gets the template's
// TLS settings with ServerName set to its own name, and no TLS at all when
// it is a unix socket.
func (c *Config) hostPoolConfig(i int) *pgxpool.Config {
	h := c.Hosts[i]
	pc := c.PoolConfig.Copy()
	cc := pc.ConnConfig
	cc.ValidateConnect = nil
	cc.Fallbacks = nil

	if len(h.tls) == 0 {
		cc.Host, cc.Port = h.Host, h.Port
		if network, _ := pgconn.NetworkAddress(h.Host, h.Port); network == "unix" {
			cc.TLSConfig = nil
		} else if cc.TLSConfig != nil && cc.TLSConfig.ServerName != "" {
			cc.TLSConfig.ServerName = serverName(h.Host)
		}
		return pc
	}

	first := h.tls[0]
	cc.Host, cc.Port = first.Host, first.Port
	cc.TLSConfig = cloneTLS(first.TLSConfig)
	for _, v := range h.tls[1:] {
		cc.Fallbacks = append(cc.Fallbacks, copyFallback(v))
	}
	return pc
}

// serverName is what pgconn would put in tls.Config.ServerName for host:
// the name itself, or "" for an IP address.
func serverName(host string) string {
	if net.ParseIP(host) != nil {
		return ""
	}
	return host
}

func cloneTLS(t *tls.Config) *tls.Config {
	if t == nil {
		return nil
	}
	return t.Clone()
}

// parseState carries what ParseConfig needs to build safe errors.
type parseState struct {
	// secrets are strings that must not appear in an error message: the
	// password as written and as decoded, and the sslpassword.
	secrets []string
}

// minScrubLen is the shortest secret fail scrubs from messages. Shorter
// ones would turn ordinary words into noise. Messages are built so as not
// to contain passwords in the first place; scrubbing is a second line.
const minScrubLen = 4

// fail builds a *ConfigError with secrets removed from msg.
func (p *parseState) fail(key, msg string, err error) *ConfigError {
	for _, s := range p.secrets {
		if len(s) >= minScrubLen {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return &ConfigError{Key: key, Msg: msg, Err: err}
}

// badValue reports a bad value of one of our keys, quoting the value.
func (p *parseState) badValue(key, value, problem string, err error) *ConfigError {
	return p.fail(key, strconv.Quote(value)+" "+problem, err)
}

// pgxError wraps an error from pgx's parser. pgx's message quotes the
// connection string with passwords masked as well as it can; this one leaves
// the connection string out altogether and keeps only pgx's explanation.
func (p *parseState) pgxError(err error) *ConfigError {
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		stripped := *pce
		stripped.ConnString = ""
		msg := strings.TrimPrefix(stripped.Error(), "cannot parse ``: ")
		return p.fail("", msg, &stripped)
	}
	// pgx returns nothing else today; say little about what it might.
	return p.fail("", "pgx rejected the connection string", err)
}

// targetSessionAttrs is the effective target_session_attrs and where it
// came from.
type targetSessionAttrs struct {
	value       string
	set         bool // given in the connection string or a service file
	fromService bool // a service file has the key (whether or not it won)
	fromEnv     bool // PGTARGETSESSIONATTRS is set (whether or not it won)
	envOnly     bool // the value is the environment variable's
}

// findTargetSessionAttrs works out target_session_attrs the way pgconn
// does: the connection string first, then the service file, then the
// environment.
func (p *parseState) findTargetSessionAttrs(scan scanResult) targetSessionAttrs {
	var t targetSessionAttrs
	svcValue, svcHas := scan.serviceSetting(keyTargetSessionAttrs)
	envValue := os.Getenv(envTargetSessionAttrs)
	t.fromService = svcHas
	t.fromEnv = envValue != ""
	switch {
	case scan.has(keyTargetSessionAttrs):
		t.value, _ = scan.get(keyTargetSessionAttrs)
		t.set = true
	case svcHas:
		t.value, t.set = svcValue, true
	case t.fromEnv:
		t.value, t.envOnly = envValue, true
	}
	return t
}

func (p *parseState) applyTarget(c *Config, own map[string]string, tsa targetSessionAttrs) error {
	v, hasTarget := own[keyTarget]
	var fromTSA hosthealth.Target
	// The environment variable is only a default: target= outranks it.
	if tsa.set || (tsa.envOnly && !hasTarget) {
		t, err := hosthealth.ParseTarget(tsa.value)
		if err != nil {
			problem := "is not a known target"
			if tsa.envOnly {
				problem = "(from " + envTargetSessionAttrs + ") is not a known target"
			}
			return p.badValue(keyTargetSessionAttrs, tsa.value, problem+"; "+targetSpellings, err)
		}
		fromTSA = t
		c.Target = t
	}
	if !hasTarget {
		return nil
	}
	t, err := hosthealth.ParseTarget(v)
	if err != nil {
		return p.badValue(keyTarget, v, "is not a known target; "+targetSpellings, err)
	}
	if tsa.set && t != fromTSA {
		return p.fail(keyTarget, fmt.Sprintf("%q conflicts with %s %q; give one of them, or the same target in both",
			v, keyTargetSessionAttrs, tsa.value), nil)
	}
	c.Target = t
	return nil
}

const targetSpellings = "accepted: any, read-write, primary, read-only, standby, replica, prefer-standby, prefer-replica"

func (p *parseState) applyBudget(c *Config, own map[string]string) error {
	if v, ok := own[keyMaxAttempts]; ok {
		n, err := strconv.ParseInt(v, 10, 32)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return p.badValue(keyMaxAttempts, v, "is out of range", err)
		case err != nil:
			return p.badValue(keyMaxAttempts, v, "is not a whole number", err)
		case n < 1:
			return p.badValue(keyMaxAttempts, v, "is too small: at least 1 attempt is needed", nil)
		}
		c.MaxAttempts = int(n)
	}
	var err error
	if c.MaxDuration, err = p.duration(own, keyMaxDuration, c.MaxDuration, positive); err != nil {
		return err
	}
	if c.BackoffInitial, err = p.duration(own, keyBackoffInitial, c.BackoffInitial, positive); err != nil {
		return err
	}
	if v, ok := own[keyBackoffMax]; ok {
		if c.BackoffMax, err = p.duration(own, keyBackoffMax, c.BackoffMax, positive); err != nil {
			return err
		}
		if c.BackoffMax < c.BackoffInitial {
			return p.badValue(keyBackoffMax, v, fmt.Sprintf("is less than %s (%s)", keyBackoffInitial, c.BackoffInitial), nil)
		}
	} else {
		c.BackoffMax = max(c.BackoffMax, c.BackoffInitial)
	}
	return nil
}

func (p *parseState) applyReplicaSettings(c *Config, own map[string]string) error {
	var err error
	if c.HealthProbeInterval, err = p.duration(own, keyHealthProbeInterval, c.HealthProbeInterval, positive); err != nil {
		return err
	}
	if c.PinAfterWrite, err = p.duration(own, keyPinAfterWrite, c.PinAfterWrite, nonNegative); err != nil {
		return err
	}
	if c.MaxLag, err = p.duration(own, keyMaxLag, c.MaxLag, nonNegative); err != nil {
		return err
	}
	if c.MaxLag > 0 && c.MaxLag <= c.HealthProbeInterval {
		// A replica's staleness bound only shrinks when it is probed, so a
		// gate at or below the probe period would shut every replica out
		// between probes.
		return p.badValue(keyMaxLag, own[keyMaxLag], fmt.Sprintf("must be greater than %s (%s), or 0 for no gate",
			keyHealthProbeInterval, c.HealthProbeInterval), nil)
	}
	return nil
}

func (p *parseState) applyPatroni(c *Config, own map[string]string) error {
	if v, ok := own[keyPatroniAPIURLs]; ok {
		urls, err := p.patroniURLs(v)
		if err != nil {
			return err
		}
		c.patroniAPIURLs = urls
	}
	var err error
	if c.patroniRefresh, err = p.duration(own, keyPatroniRefresh, c.patroniRefresh, positive); err != nil {
		return err
	}

	var unknown []string
	for k := range own {
		if strings.HasPrefix(k, fallbackKeyPrefix) && !slices.Contains(fallbackKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return p.fail(unknown[0], "unknown key; the fallback_* keys are "+strings.Join(fallbackKeys, ", "), nil)
	}
	if c.fallbackConnectTimeout, err = p.duration(own, keyFallbackConnectTimeout, c.fallbackConnectTimeout, positive); err != nil {
		return err
	}
	if c.fallbackCooldown, err = p.duration(own, keyFallbackCooldown, c.fallbackCooldown, positive); err != nil {
		return err
	}
	if c.fallbackLifetime, err = p.duration(own, keyFallbackLifetime, c.fallbackLifetime, positive); err != nil {
		return err
	}
	return nil
}

// patroniURLs checks a comma list of Patroni REST API base URLs. A URL may
// carry credentials, so messages quote only the redacted form of a URL, and
// nothing of one that does not parse.
func (p *parseState) patroniURLs(v string) ([]string, error) {
	var out []string
	for i, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		n := i + 1
		if s == "" {
			return nil, p.fail(keyPatroniAPIURLs, fmt.Sprintf("entry %d is empty", n), nil)
		}
		u, err := url.Parse(s)
		if err != nil {
			return nil, p.fail(keyPatroniAPIURLs, fmt.Sprintf("entry %d is not a valid URL", n), nil)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, p.fail(keyPatroniAPIURLs, fmt.Sprintf("entry %d (%q) is not an http:// or https:// URL with a host", n, u.Redacted()), nil)
		}
		out = append(out, s)
	}
	return out, nil
}

// durationRule is a constraint on a duration key.
type durationRule int

const (
	positive    durationRule = iota // > 0
	nonNegative                     // >= 0
)

// duration reads key from own, or returns def when it is absent.
func (p *parseState) duration(own map[string]string, key string, def time.Duration, rule durationRule) (time.Duration, error) {
	v, ok := own[key]
	if !ok {
		return def, nil
	}
	d, problem, err := parseDuration(v)
	if problem != "" {
		return 0, p.badValue(key, v, problem, err)
	}
	switch {
	case rule == positive && d <= 0:
		return 0, p.badValue(key, v, "must be greater than zero", nil)
	case rule == nonNegative && d < 0:
		return 0, p.badValue(key, v, "must not be negative", nil)
	}
	return d, nil
}

// parseDuration reads Go duration syntax ("250ms", "1m30s") or a bare
// whole number of milliseconds ("250", "-5"). It returns a problem
// description instead of an error message so the caller can name the key.
func parseDuration(s string) (d time.Duration, problem string, err error) {
	if isInteger(s) {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
			return 0, "is out of range", err
		}
		return time.Duration(ms) * time.Millisecond, "", nil
	}
	d, err = time.ParseDuration(s)
	if err != nil {
		return 0, `is not a duration: write it like "250ms" or "2s", or as whole milliseconds`, err
	}
	return d, "", nil
}

// isInteger reports whether s is an optionally signed run of ASCII digits.
func isInteger(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// --- Reading the connection string ---
//
// pgconn does not tell which target_session_attrs it saw and refuses the
// spellings it does not know (replica, prefer-replica), so ParseConfig reads
// that key itself and removes it before pgx sees the string. The scanner
// below follows pgconn's grammar for both forms closely enough to find
// where each key/value pair sits; when it cannot make sense of a string,
// pgconn cannot either, and pgconn's error is reported.

// pair is one key/value pair of a connection string.
type pair struct {
	key, value string
	start, end int // byte offsets of the whole pair in the string
}

// scanResult is what scanConnString found.
type scanResult struct {
	isURL      bool
	pairs      []pair // keyword/value pairs, or the URL's query parameters
	queryStart int    // URL only: offset just after '?', or -1 when there is no query
	userinfoPW string // URL only: the password in the userinfo, as written
}

// get returns the value of the last pair named key, as pgconn keeps the
// last of repeated keys.
func (s scanResult) get(key string) (string, bool) {
	for i := len(s.pairs) - 1; i >= 0; i-- {
		if s.pairs[i].key == key {
			return s.pairs[i].value, true
		}
	}
	return "", false
}

func (s scanResult) has(key string) bool {
	_, ok := s.get(key)
	return ok
}

// secrets lists the password-like values found by the scan, as written and
// as decoded.
func (s scanResult) secrets() []string {
	var out []string
	if s.userinfoPW != "" {
		out = append(out, s.userinfoPW)
		if d, err := uriDecode(s.userinfoPW); err == nil && d != s.userinfoPW {
			out = append(out, d)
		}
	}
	for _, p := range s.pairs {
		if p.key == "password" || p.key == "sslpassword" {
			out = append(out, p.value)
		}
	}
	return out
}

// serviceSetting returns key from the service file section that pgconn
// would read, if there is one. pgconn takes the service name from the
// string or PGSERVICE and the file from the string, PGSERVICEFILE or
// ~/.pg_service.conf. A file that cannot be read is ignored here; pgx
// reports it.
func (s scanResult) serviceSetting(key string) (string, bool) {
	name, ok := s.get("service")
	if !ok {
		name = os.Getenv(envService)
	}
	if name == "" {
		return "", false
	}
	path, ok := s.get("servicefile")
	if !ok {
		path = os.Getenv(envServiceFile)
	}
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", false
		}
		path = filepath.Join(home, ".pg_service.conf")
	}
	sf, err := pgservicefile.ReadServicefile(path)
	if err != nil {
		return "", false
	}
	svc, err := sf.GetService(name)
	if err != nil {
		return "", false
	}
	v, ok := svc.Settings[key]
	return v, ok
}

// connectTimeoutSet reports whether pgconn will find connect_timeout in the
// string, a service file or PGCONNECT_TIMEOUT.
func (s scanResult) connectTimeoutSet() bool {
	if s.has("connect_timeout") || os.Getenv(envConnectTimeout) != "" {
		return true
	}
	_, ok := s.serviceSetting("connect_timeout")
	return ok
}

// scanConnString finds the key/value pairs of a connection string. On error
// it still returns what it found before the error, for the secrets list.
func scanConnString(s string) (scanResult, error) {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		return scanURL(s)
	}
	pairs, err := scanKeywordValue(s)
	return scanResult{pairs: pairs, queryStart: -1}, err
}

var (
	errScanSyntax = errors.New("malformed connection string")
	errScanNUL    = errors.New("connection string contains a NUL byte")
)

// kvSpace is the whitespace of the keyword/value form.
const kvSpace = " \t\n\r\v\f"

func isKVSpace(b byte) bool { return strings.IndexByte(kvSpace, b) >= 0 }

func skipKVSpace(s string, i int) int {
	for i < len(s) && isKVSpace(s[i]) {
		i++
	}
	return i
}

// scanKeywordValue reads "key = value" pairs with libpq's rules: a value
// is either a run of non-space bytes or a single-quoted string, and a
// backslash makes the byte after it literal in both. As in libpq, a value
// starts at the first non-space byte after '=', so in "a= b=c" the value of
// a is "b=c".
func scanKeywordValue(s string) ([]pair, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, errScanNUL
	}
	var pairs []pair
	i := skipKVSpace(s, 0)
	for i < len(s) {
		start := i
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 {
			return pairs, errScanSyntax
		}
		eq += i
		key := strings.TrimRight(s[i:eq], kvSpace)
		if key == "" || strings.ContainsAny(key, kvSpace) {
			return pairs, errScanSyntax
		}
		j := skipKVSpace(s, eq+1)
		var value string
		var end int
		switch {
		case j == len(s):
			end = j
		case s[j] != '\'':
			k := j
			for k < len(s) && !isKVSpace(s[k]) {
				if s[k] == '\\' {
					k++
					if k == len(s) {
						break
					}
				}
				k++
			}
			value, end = unescapeKV(s[j:k]), k
		default:
			k := j + 1
			for k < len(s) && s[k] != '\'' {
				if s[k] == '\\' {
					k++
				}
				k++
			}
			if k >= len(s) {
				return pairs, errScanSyntax
			}
			value, end = unescapeKV(s[j+1:k]), k+1
		}
		pairs = append(pairs, pair{key: canonicalKey(key), value: value, start: start, end: end})
		i = skipKVSpace(s, end)
	}
	return pairs, nil
}

// unescapeKV drops each backslash and keeps the byte after it.
func unescapeKV(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			if i == len(s) {
				break
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// canonicalKey applies pgconn's one key alias.
func canonicalKey(k string) string {
	if k == "dbname" {
		return "database"
	}
	return k
}

// scanURL finds the query parameters of a postgres:// URL. It walks the
// URL as pgconn does (libpq's grammar, which allows host lists and is not
// what net/url accepts): an optional userinfo ending at an '@' met before
// any '/', then host[:port] items separated by commas, with IPv6 addresses
// in brackets, then an optional /dbname, then an optional ?query.
func scanURL(s string) (scanResult, error) {
	res := scanResult{isURL: true, queryStart: -1}
	if strings.IndexByte(s, 0) >= 0 {
		return res, errScanNUL
	}
	i := strings.Index(s, "://") + len("://")

	if at := strings.IndexAny(s[i:], "@/"); at >= 0 && s[i+at] == '@' {
		if _, pw, ok := strings.Cut(s[i:i+at], ":"); ok {
			res.userinfoPW = pw
		}
		i += at + 1
	}

	for {
		if i < len(s) && s[i] == '[' {
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return res, errScanSyntax
			}
			i += end + 1
		}
		for i < len(s) && s[i] != '/' && s[i] != '?' && s[i] != ',' {
			i++
		}
		if i < len(s) && s[i] == ',' {
			i++
			continue
		}
		break
	}
	if i < len(s) && s[i] == '/' {
		q := strings.IndexByte(s[i:], '?')
		if q < 0 {
			return res, nil
		}
		i += q
	}
	if i >= len(s) {
		return res, nil
	}
	// s[i] == '?'
	i++
	res.queryStart = i
	for i < len(s) {
		end := strings.IndexByte(s[i:], '&')
		if end < 0 {
			end = len(s)
		} else {
			end += i
		}
		rawKey, rawValue, ok := strings.Cut(s[i:end], "=")
		if !ok || strings.Contains(rawValue, "=") {
			return res, errScanSyntax
		}
		key, err := uriDecode(rawKey)
		if err != nil {
			return res, errScanSyntax
		}
		value, err := uriDecode(rawValue)
		if err != nil {
			return res, errScanSyntax
		}
		res.pairs = append(res.pairs, pair{key: canonicalKey(key), value: value, start: i, end: end})
		i = end + 1
	}
	return res, nil
}

// uriDecode decodes a URL component as libpq does: %XX escapes (not %00),
// spaces allowed only at either end and dropped there, and '+' left alone.
func uriDecode(s string) (string, error) {
	s = strings.Trim(s, " ")
	if strings.IndexByte(s, ' ') >= 0 {
		return "", errScanSyntax
	}
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", errScanSyntax
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 || hi<<4|lo == 0 {
			return "", errScanSyntax
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// rewriteConnString returns s without its target_session_attrs pairs. With
// neutral set it also adds target_session_attrs=any, which outranks a
// service file and PGTARGETSESSIONATTRS inside pgconn, so pgconn neither
// rejects a spelling it does not know nor installs a check of its own.
// Everything else is left byte for byte as written.
func rewriteConnString(s string, scan scanResult, neutral bool) string {
	if !scan.has(keyTargetSessionAttrs) && !neutral {
		return s
	}
	const neutralPair = keyTargetSessionAttrs + "=any"
	if !scan.isURL {
		var b strings.Builder
		if neutral {
			// At the front: appended after a value that ends in a backslash
			// it would be swallowed by that value.
			b.WriteString(neutralPair + " ")
		}
		last := 0
		for _, p := range scan.pairs {
			if p.key == keyTargetSessionAttrs {
				b.WriteString(s[last:p.start])
				last = p.end
			}
		}
		b.WriteString(s[last:])
		return b.String()
	}

	if scan.queryStart < 0 {
		return s + "?" + neutralPair
	}
	var kept []string
	if neutral {
		kept = append(kept, neutralPair)
	}
	for _, p := range scan.pairs {
		if p.key != keyTargetSessionAttrs {
			kept = append(kept, s[p.start:p.end])
		}
	}
	return s[:scan.queryStart] + strings.Join(kept, "&")
}
