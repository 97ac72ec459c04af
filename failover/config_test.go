package failover

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover/internal/connkeys"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/replica"
)

const testPassword = "hunter2-secret"

// Two strings naming the same two hosts, one per form. Tests add keys to them
// with withKeys.
const (
	urlBase = "postgres://app:" + testPassword + "@db-a:5432,db-b:5433/appdb"
	kvBase  = "host=db-a,db-b port=5432,5433 user=app password=" + testPassword + " dbname=appdb"
)

type kv struct{ k, v string }

type form struct{ name, conn string }

// withKeys returns urlBase and kvBase with the given keys added, quoted as
// each form needs.
func withKeys(keys ...kv) []form {
	var q, k strings.Builder
	for i, p := range keys {
		if i > 0 {
			q.WriteByte('&')
		}
		q.WriteString(urlEscape(p.k) + "=" + urlEscape(p.v))
		k.WriteString(" " + p.k + "=" + kvQuote(p.v))
	}
	u := urlBase
	if q.Len() > 0 {
		u += "?" + q.String()
	}
	return []form{{"url", u}, {"kv", kvBase + k.String()}}
}

// urlEscape percent-encodes every byte but the unreserved ones. ('+' is not
// a space to libpq, so url.QueryEscape would be wrong here.)
func urlEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

func kvQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// clearPGEnv blanks the libpq environment variables that change what a
// connection string means. pgconn ignores empty values.
func clearPGEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{
		"PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD", "PGSSLMODE",
		"PGSSLNEGOTIATION", "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY",
		"PGTARGETSESSIONATTRS", "PGCONNECT_TIMEOUT", "PGSERVICE", "PGSERVICEFILE",
		"PGAPPNAME", "PGOPTIONS", "PGTZ",
	} {
		t.Setenv(k, "")
	}
}

func mustParse(t *testing.T, conn string) *Config {
	t.Helper()
	c, err := ParseConfig(conn)
	if err != nil {
		t.Fatalf("ParseConfig(%q): %v", conn, err)
	}
	return c
}

func addrs(hosts []HostConfig) []string {
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = h.Addr()
	}
	return out
}

func TestParseConfigHosts(t *testing.T) {
	clearPGEnv(t)
	tests := []struct {
		name string
		conn string
		want []string
	}{
		{"url one host", "postgres://app@db-a:5432/appdb", []string{"db-a:5432"}},
		{"kv one host", "host=db-a port=5432 user=app dbname=appdb", []string{"db-a:5432"}},
		{"url default port", "postgres://app@db-a/appdb", []string{"db-a:5432"}},
		{"url host list", "postgres://app@db-a:5432,db-b:5433,db-c:5434/appdb", []string{"db-a:5432", "db-b:5433", "db-c:5434"}},
		{"url host list, ports partly given", "postgres://app@db-a,db-b:5433/appdb", []string{"db-a:5432", "db-b:5433"}},
		{"kv host and port lists", "host=db-a,db-b,db-c port=5432,5433,5434", []string{"db-a:5432", "db-b:5433", "db-c:5434"}},
		{"kv one port for all hosts", "host=db-a,db-b port=6432", []string{"db-a:6432", "db-b:6432"}},
		{"url ipv6", "postgres://app@[::1]:5432/appdb", []string{"[::1]:5432"}},
		{"url ipv6 list", "postgres://app@[::1]:5432,[fd00::2]:5433/appdb", []string{"[::1]:5432", "[fd00::2]:5433"}},
		{"kv ipv6", "host=::1 port=5432", []string{"[::1]:5432"}},
		{"kv unix socket", "host=/var/run/postgresql port=5433", []string{"/var/run/postgresql:5433"}},
		{"url unix socket in query", "postgres:///appdb?host=/tmp/pg&port=5433", []string{"/tmp/pg:5433"}},
		{"kv socket and tcp mixed", "host=/tmp/pg,db-b port=5432", []string{"/tmp/pg:5432", "db-b:5432"}},
		{"duplicate dropped, first kept", "host=db-a,db-b,db-a port=5432", []string{"db-a:5432", "db-b:5432"}},
		{"same host other port kept", "host=db-a,db-a port=5432,5433", []string{"db-a:5432", "db-a:5433"}},
		{"url duplicate dropped", "postgres://app@db-a:5432,db-a:5432,db-b:5432/appdb", []string{"db-a:5432", "db-b:5432"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.conn)
			if got := addrs(c.Hosts); !slices.Equal(got, tt.want) {
				t.Fatalf("hosts = %q, want %q", got, tt.want)
			}
			cc := c.ConnConfig
			if cc.Host != c.Hosts[0].Host || cc.Port != c.Hosts[0].Port {
				t.Errorf("template host = %s:%d, want the first host %s", cc.Host, cc.Port, c.Hosts[0].Addr())
			}
			if cc.Fallbacks != nil {
				t.Errorf("template Fallbacks = %v, want nil", cc.Fallbacks)
			}
			for _, h := range c.Hosts {
				if len(h.tls) == 0 {
					t.Errorf("host %s has no connection variants", h.Addr())
				}
			}
		})
	}
}

func TestParseConfigUnixSocketHasNoTLS(t *testing.T) {
	clearPGEnv(t)
	c := mustParse(t, "host=/var/run/postgresql,db-b port=5432 sslmode=prefer")
	if n := len(c.Hosts[0].tls); n != 1 || c.Hosts[0].tls[0].TLSConfig != nil {
		t.Errorf("socket host variants: %d, first TLS %v; want one plain variant", n, c.Hosts[0].tls[0].TLSConfig)
	}
	if n := len(c.Hosts[1].tls); n != 2 {
		t.Errorf("tcp host variants = %d, want 2 (TLS, plain)", n)
	}
}

func TestParseConfigSSLModeGrouping(t *testing.T) {
	clearPGEnv(t)
	tests := []struct {
		sslmode string
		tls     []bool // per variant: TLS or not, in pgconn's order
	}{
		{"prefer", []bool{true, false}},
		{"allow", []bool{false, true}},
		{"disable", []bool{false}},
		{"require", []bool{true}},
	}
	for _, tt := range tests {
		for _, f := range []form{
			{"url", "postgres://app@db-a:5432,db-b:5433,db-a:5432/appdb?sslmode=" + tt.sslmode},
			{"kv", "host=db-a,db-b,db-a port=5432,5433,5432 sslmode=" + tt.sslmode},
		} {
			t.Run(tt.sslmode+"/"+f.name, func(t *testing.T) {
				c := mustParse(t, f.conn)
				if got, want := addrs(c.Hosts), []string{"db-a:5432", "db-b:5433"}; !slices.Equal(got, want) {
					t.Fatalf("hosts = %q, want %q", got, want)
				}
				for _, h := range c.Hosts {
					var got []bool
					for _, v := range h.tls {
						if v.Host != h.Host || v.Port != h.Port {
							t.Errorf("host %s holds a variant for %s:%d", h.Addr(), v.Host, v.Port)
						}
						got = append(got, v.TLSConfig != nil)
					}
					if !slices.Equal(got, tt.tls) {
						t.Errorf("host %s variants (TLS?) = %v, want %v", h.Addr(), got, tt.tls)
					}
				}
			})
		}
	}
}

func TestParseConfigAdjacentDuplicatesGroupedApart(t *testing.T) {
	clearPGEnv(t)
	// With sslmode=prefer pgconn lists a(TLS) a(plain) a(TLS) a(plain) b...:
	// grouping by host:port alone would fold the two a entries into one HostConfig
	// with four variants and shift zones= by one.
	c := mustParse(t, "host=db-a,db-a,db-b port=5432 sslmode=prefer zones=z1,z2,z3")
	if got, want := addrs(c.Hosts), []string{"db-a:5432", "db-b:5432"}; !slices.Equal(got, want) {
		t.Fatalf("hosts = %q, want %q", got, want)
	}
	if n := len(c.Hosts[0].tls); n != 2 {
		t.Errorf("db-a variants = %d, want 2", n)
	}
	if c.Hosts[0].Zone != "z1" || c.Hosts[1].Zone != "z3" {
		t.Errorf("zones = %q, %q; want z1, z3", c.Hosts[0].Zone, c.Hosts[1].Zone)
	}
}

func TestParseConfigTarget(t *testing.T) {
	clearPGEnv(t)
	spellings := []struct {
		value string
		want  hosthealth.Target
	}{
		{"any", hosthealth.TargetAny},
		{"read-write", hosthealth.TargetPrimary},
		{"primary", hosthealth.TargetPrimary},
		{"read-only", hosthealth.TargetReplica},
		{"standby", hosthealth.TargetReplica},
		{"replica", hosthealth.TargetReplica},
		{"prefer-standby", hosthealth.TargetPreferReplica},
		{"prefer-replica", hosthealth.TargetPreferReplica},
	}
	for _, sp := range spellings {
		for _, key := range []string{connkeys.Target, connkeys.TargetSessionAttrs} {
			for _, f := range withKeys(kv{key, sp.value}) {
				t.Run(key+"="+sp.value+"/"+f.name, func(t *testing.T) {
					c := mustParse(t, f.conn)
					if c.Target != sp.want {
						t.Errorf("Target = %v, want %v", c.Target, sp.want)
					}
					if c.ConnConfig.ValidateConnect != nil {
						t.Error("ValidateConnect is set; the Pool must do the role check itself")
					}
				})
			}
		}
		// Both keys, agreeing.
		for _, f := range withKeys(kv{connkeys.Target, sp.value}, kv{connkeys.TargetSessionAttrs, sp.want.String()}) {
			t.Run("both="+sp.value+"/"+f.name, func(t *testing.T) {
				if c := mustParse(t, f.conn); c.Target != sp.want {
					t.Errorf("Target = %v, want %v", c.Target, sp.want)
				}
			})
		}
	}
	for _, f := range withKeys() {
		t.Run("default/"+f.name, func(t *testing.T) {
			if c := mustParse(t, f.conn); c.Target != hosthealth.TargetPrimary {
				t.Errorf("default Target = %v, want %v", c.Target, hosthealth.TargetPrimary)
			}
		})
	}
}

func TestParseConfigTargetConflict(t *testing.T) {
	clearPGEnv(t)
	for _, f := range withKeys(kv{connkeys.Target, "primary"}, kv{connkeys.TargetSessionAttrs, "replica"}) {
		t.Run(f.name, func(t *testing.T) {
			_, err := ParseConfig(f.conn)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *ConfigError", err)
			}
			msg := err.Error()
			for _, want := range []string{connkeys.Target, connkeys.TargetSessionAttrs, `"primary"`, `"replica"`} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not mention %s", msg, want)
				}
			}
		})
	}
}

func TestParseConfigTargetFromEnvironment(t *testing.T) {
	tests := []struct {
		name    string
		env     string
		conn    string
		want    hosthealth.Target
		wantErr string
	}{
		{"env alone", "replica", "host=db-a", hosthealth.TargetReplica, ""},
		{"env spelling pgconn knows", "read-only", "host=db-a", hosthealth.TargetReplica, ""},
		{"string wins over env", "replica", "host=db-a target_session_attrs=primary", hosthealth.TargetPrimary, ""},
		{"url string wins over env", "replica", "postgres://db-a/?target_session_attrs=any", hosthealth.TargetAny, ""},
		{"target wins over env", "replica", "host=db-a target=primary", hosthealth.TargetPrimary, ""},
		{"bad env ignored when string sets it", "bogus", "host=db-a target_session_attrs=read-write", hosthealth.TargetPrimary, ""},
		{"bad env ignored when target set", "bogus", "host=db-a target=any", hosthealth.TargetAny, ""},
		{"bad env alone", "bogus", "host=db-a", 0, "PGTARGETSESSIONATTRS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearPGEnv(t)
			t.Setenv("PGTARGETSESSIONATTRS", tt.env)
			c, err := ParseConfig(tt.conn)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), connkeys.TargetSessionAttrs) {
					t.Fatalf("err = %v, want one naming %s and %s", err, connkeys.TargetSessionAttrs, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Target != tt.want {
				t.Errorf("Target = %v, want %v", c.Target, tt.want)
			}
			if c.ConnConfig.ValidateConnect != nil {
				t.Error("ValidateConnect is set")
			}
		})
	}
}

func TestParseConfigServiceFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pg_service.conf")
	err := os.WriteFile(path, []byte(`[standbys]
host=db-s1,db-s2
port=5432
target_session_attrs=standby
connect_timeout=7
zone=eu-1b
failover_max_attempts=3

[replicas]
host=db-r1
target_session_attrs=replica
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		conn        string
		env         string
		wantTarget  hosthealth.Target
		wantTimeout time.Duration
	}{
		{"service sets target and timeout", "service=standbys servicefile=" + path, "", hosthealth.TargetReplica, 7 * time.Second},
		{"service beats env", "service=standbys servicefile=" + path, "read-write", hosthealth.TargetReplica, 7 * time.Second},
		{"string beats service", "service=standbys servicefile=" + path + " target_session_attrs=any", "", hosthealth.TargetAny, 7 * time.Second},
		{"spelling pgconn does not know", "service=replicas servicefile=" + path, "", hosthealth.TargetReplica, connkeys.DefaultConnectTimeout},
		{"url form", "postgres:///?service=replicas&servicefile=" + urlEscape(path), "", hosthealth.TargetReplica, connkeys.DefaultConnectTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearPGEnv(t)
			t.Setenv("PGTARGETSESSIONATTRS", tt.env)
			c := mustParse(t, tt.conn)
			if c.Target != tt.wantTarget {
				t.Errorf("Target = %v, want %v", c.Target, tt.wantTarget)
			}
			if got := c.ConnConfig.ConnectTimeout; got != tt.wantTimeout {
				t.Errorf("ConnectTimeout = %v, want %v", got, tt.wantTimeout)
			}
			if c.ConnConfig.ValidateConnect != nil {
				t.Error("ValidateConnect is set")
			}
		})
	}
	t.Run("our keys in the service file", func(t *testing.T) {
		clearPGEnv(t)
		c := mustParse(t, "service=standbys servicefile="+path)
		if c.Zone != "eu-1b" || c.MaxAttempts != 3 {
			t.Errorf("Zone, MaxAttempts = %q, %d; want eu-1b, 3", c.Zone, c.MaxAttempts)
		}
		if _, ok := c.ConnConfig.RuntimeParams[connkeys.Zone]; ok {
			t.Error("zone from the service file left in RuntimeParams")
		}
	})
}

func TestParseConfigZones(t *testing.T) {
	clearPGEnv(t)
	tests := []struct {
		name  string
		conn  string
		zone  string
		zones []string
	}{
		{"none", "host=db-a,db-b,db-c", "", []string{"", "", ""}},
		{"one per host", "host=db-a,db-b,db-c zone=eu-1a zones=eu-1a,eu-1b,eu-1c", "eu-1a", []string{"eu-1a", "eu-1b", "eu-1c"}},
		{"single for all", "host=db-a,db-b,db-c zones=eu-1a", "", []string{"eu-1a", "eu-1a", "eu-1a"}},
		{"empty entry", "host=db-a,db-b,db-c zones=eu-1a,,eu-1c", "", []string{"eu-1a", "", "eu-1c"}},
		{"url", "postgres://db-a,db-b/appdb?zones=eu-1a,eu-1b&zone=eu-1b", "eu-1b", []string{"eu-1a", "eu-1b"}},
		{"dropped duplicate drops its zone", "host=db-a,db-b,db-a zones=z1,z2,z3", "", []string{"z1", "z2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.conn)
			if c.Zone != tt.zone {
				t.Errorf("Zone = %q, want %q", c.Zone, tt.zone)
			}
			var got []string
			for _, h := range c.Hosts {
				got = append(got, h.Zone)
			}
			if !slices.Equal(got, tt.zones) {
				t.Errorf("host zones = %q, want %q", got, tt.zones)
			}
		})
	}
}

func TestParseConfigZonesMismatch(t *testing.T) {
	clearPGEnv(t)
	for _, f := range withKeys(kv{connkeys.Zones, "eu-1a,eu-1b,eu-1c"}) {
		t.Run(f.name, func(t *testing.T) {
			_, err := ParseConfig(f.conn)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != connkeys.Zones {
				t.Fatalf("err = %v, want a *ConfigError for %s", err, connkeys.Zones)
			}
			for _, want := range []string{connkeys.Zones, "3 zones", "2 hosts"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestParseConfigDefaults(t *testing.T) {
	clearPGEnv(t)
	for _, f := range withKeys() {
		t.Run(f.name, func(t *testing.T) {
			c := mustParse(t, f.conn)
			checks := []struct {
				name      string
				got, want any
			}{
				{"Target", c.Target, hosthealth.TargetPrimary},
				{"Zone", c.Zone, ""},
				{"MaxAttempts", c.MaxAttempts, 8},
				{"MaxDuration", c.MaxDuration, 30 * time.Second},
				{"BackoffInitial", c.BackoffInitial, 50 * time.Millisecond},
				{"BackoffMax", c.BackoffMax, time.Second},
				{"HealthProbeInterval", c.HealthProbeInterval, time.Second},
				{"HealthProbeWaitMax", c.HealthProbeWaitMax, 50 * time.Millisecond},
				{"NameRecheckInterval", c.NameRecheckInterval, 50 * time.Millisecond},
				{"replica.pinAfterWrite", c.Replica.PinAfterWrite, time.Second},
				{"replica.maxLag", c.Replica.MaxLag, time.Duration(0)},
				{"replica.wait", c.Replica.Wait, 20 * time.Millisecond},
				{"ConnectTimeout", c.ConnConfig.ConnectTimeout, 5 * time.Second},
				{"patroni.APIURLs", len(c.patroni.APIURLs), 0},
				{"patroni.Refresh", c.patroni.Refresh, 3 * time.Second},
				{"fallbackConnectTimeout", c.patroni.FallbackConnectTimeout, 5 * time.Second},
				{"fallbackCooldown", c.patroni.FallbackCooldown, 30 * time.Second},
				{"fallbackLifetime", c.patroni.FallbackLifetime, 30 * time.Second},
				{"tcpUserTimeout", c.tcpUserTimeout, 10 * time.Second},
				{"DialFunc set", c.ConnConfig.DialFunc != nil, true},
				{"createdByParseConfig", c.createdByParseConfig, true},
				{"MeterProvider nil", c.MeterProvider == nil, true},
				{"TracerProvider nil", c.TracerProvider == nil, true},
				{"Logger nil", c.Logger == nil, true},
			}
			for _, ch := range checks {
				if ch.got != ch.want {
					t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
				}
			}
			if c.ConnString() != f.conn {
				t.Errorf("ConnString() = %q, want the string given", c.ConnString())
			}
		})
	}
}

func TestParseConfigConnectTimeout(t *testing.T) {
	tests := []struct {
		name string
		conn string
		env  string
		want time.Duration
	}{
		{"default", "host=db-a", "", connkeys.DefaultConnectTimeout},
		{"url default", "postgres://db-a/appdb", "", connkeys.DefaultConnectTimeout},
		{"kv set", "host=db-a connect_timeout=2", "", 2 * time.Second},
		{"url set", "postgres://db-a/appdb?connect_timeout=3", "", 3 * time.Second},
		{"zero means no limit", "host=db-a connect_timeout=0", "", 0},
		{"environment", "host=db-a", "9", 9 * time.Second},
		{"string beats environment", "host=db-a connect_timeout=4", "9", 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearPGEnv(t)
			t.Setenv("PGCONNECT_TIMEOUT", tt.env)
			c := mustParse(t, tt.conn)
			if got := c.ConnConfig.ConnectTimeout; got != tt.want {
				t.Errorf("ConnectTimeout = %v, want %v", got, tt.want)
			}
			if got := c.poolConfig(c.Hosts[0]).ConnConfig.ConnectTimeout; got != tt.want {
				t.Errorf("host pool ConnectTimeout = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseConfigDurations(t *testing.T) {
	clearPGEnv(t)
	fields := []struct {
		key string
		get func(*Config) time.Duration
	}{
		{connkeys.MaxDuration, func(c *Config) time.Duration { return c.MaxDuration }},
		{connkeys.BackoffInitial, func(c *Config) time.Duration { return c.BackoffInitial }},
		{connkeys.BackoffMax, func(c *Config) time.Duration { return c.BackoffMax }},
		{connkeys.HealthProbeInterval, func(c *Config) time.Duration { return c.HealthProbeInterval }},
		{connkeys.PinAfterWrite, func(c *Config) time.Duration { return c.Replica.PinAfterWrite }},
		{connkeys.MaxLag, func(c *Config) time.Duration { return c.Replica.MaxLag }},
		{connkeys.ReplicaWait, func(c *Config) time.Duration { return c.Replica.Wait }},
		{connkeys.PatroniRefresh, func(c *Config) time.Duration { return c.patroni.Refresh }},
		{connkeys.FallbackConnectTimeout, func(c *Config) time.Duration { return c.patroni.FallbackConnectTimeout }},
		{connkeys.FallbackCooldown, func(c *Config) time.Duration { return c.patroni.FallbackCooldown }},
		{connkeys.FallbackLifetime, func(c *Config) time.Duration { return c.patroni.FallbackLifetime }},
		{connkeys.TCPUserTimeout, func(c *Config) time.Duration { return c.tcpUserTimeout }},
	}
	values := []struct {
		in   string
		want time.Duration
	}{
		{"2500ms", 2500 * time.Millisecond},
		{"2.5s", 2500 * time.Millisecond},
		{"2500", 2500 * time.Millisecond},
		{"1m30s", 90 * time.Second},
		{"90000", 90 * time.Second},
	}
	for _, fd := range fields {
		for _, v := range values {
			for _, f := range withKeys(kv{fd.key, v.in}) {
				t.Run(fd.key+"="+v.in+"/"+f.name, func(t *testing.T) {
					c := mustParse(t, f.conn)
					if got := fd.get(c); got != v.want {
						t.Errorf("%s = %v, want %v", fd.key, got, v.want)
					}
				})
			}
		}
	}
}

func TestParseConfigCrossFieldRules(t *testing.T) {
	clearPGEnv(t)
	tests := []struct {
		name string
		keys []kv
		get  func(*Config) any
		want any
	}{
		{"backoff max follows a large initial", []kv{{connkeys.BackoffInitial, "2s"}},
			func(c *Config) any { return c.BackoffMax }, 2 * time.Second},
		{"backoff max equal to initial", []kv{{connkeys.BackoffInitial, "200ms"}, {connkeys.BackoffMax, "200"}},
			func(c *Config) any { return c.BackoffMax }, 200 * time.Millisecond},
		{"max lag above a custom probe interval", []kv{{connkeys.HealthProbeInterval, "100ms"}, {connkeys.MaxLag, "150ms"}},
			func(c *Config) any { return c.Replica.MaxLag }, 150 * time.Millisecond},
		{"probe wait max", []kv{{connkeys.HealthProbeWaitMax, "200ms"}},
			func(c *Config) any { return c.HealthProbeWaitMax }, 200 * time.Millisecond},
		{"probe wait max at the floor", []kv{{connkeys.HealthProbeWaitMax, "2"}},
			func(c *Config) any { return c.HealthProbeWaitMax }, 2 * time.Millisecond},
		{"probe wait max equal to the probe interval", []kv{{connkeys.HealthProbeInterval, "300ms"}, {connkeys.HealthProbeWaitMax, "300ms"}},
			func(c *Config) any { return c.HealthProbeWaitMax }, 300 * time.Millisecond},
		{"probe wait max follows a short probe interval", []kv{{connkeys.HealthProbeInterval, "20ms"}},
			func(c *Config) any { return c.HealthProbeWaitMax }, 20 * time.Millisecond},
		{"max lag zero is no gate", []kv{{connkeys.MaxLag, "0"}},
			func(c *Config) any { return c.Replica.MaxLag }, time.Duration(0)},
		{"pin after write off", []kv{{connkeys.PinAfterWrite, "0"}},
			func(c *Config) any { return c.Replica.PinAfterWrite }, time.Duration(0)},
		{"max attempts", []kv{{connkeys.MaxAttempts, "3"}},
			func(c *Config) any { return c.MaxAttempts }, 3},
		{"patroni urls", []kv{{connkeys.PatroniAPIURLs, "http://p1:8008, https://u:pw@p2:8008/"}},
			func(c *Config) any { return strings.Join(c.patroni.APIURLs, "|") }, "http://p1:8008|https://u:pw@p2:8008/"},
	}
	for _, tt := range tests {
		for _, f := range withKeys(tt.keys...) {
			t.Run(tt.name+"/"+f.name, func(t *testing.T) {
				if got := tt.get(mustParse(t, f.conn)); got != tt.want {
					t.Errorf("got %v, want %v", got, tt.want)
				}
			})
		}
	}
}

func TestParseConfigInvalid(t *testing.T) {
	clearPGEnv(t)
	tests := []struct {
		name    string
		keys    []kv
		wantKey string
		want    string // also in the message
	}{
		{"attempts not a number", []kv{{connkeys.MaxAttempts, "abc"}}, connkeys.MaxAttempts, `"abc" is not a whole number`},
		{"attempts fraction", []kv{{connkeys.MaxAttempts, "2.5"}}, connkeys.MaxAttempts, "whole number"},
		{"attempts zero", []kv{{connkeys.MaxAttempts, "0"}}, connkeys.MaxAttempts, "at least 1"},
		{"attempts negative", []kv{{connkeys.MaxAttempts, "-3"}}, connkeys.MaxAttempts, "at least 1"},
		{"attempts too large", []kv{{connkeys.MaxAttempts, "99999999999"}}, connkeys.MaxAttempts, "out of range"},
		{"attempts empty", []kv{{connkeys.MaxAttempts, ""}}, connkeys.MaxAttempts, "whole number"},
		{"duration garbage", []kv{{connkeys.MaxDuration, "soon"}}, connkeys.MaxDuration, `"soon" is not a duration`},
		{"duration empty", []kv{{connkeys.MaxDuration, ""}}, connkeys.MaxDuration, "not a duration"},
		{"duration zero", []kv{{connkeys.MaxDuration, "0"}}, connkeys.MaxDuration, "greater than zero"},
		{"duration negative", []kv{{connkeys.MaxDuration, "-1s"}}, connkeys.MaxDuration, "greater than zero"},
		{"duration overflow ms", []kv{{connkeys.MaxDuration, "9223372036854775807"}}, connkeys.MaxDuration, "out of range"},
		{"duration overflow go syntax", []kv{{connkeys.MaxDuration, "9999999999h"}}, connkeys.MaxDuration, "not a duration"},
		{"backoff initial zero", []kv{{connkeys.BackoffInitial, "0s"}}, connkeys.BackoffInitial, "greater than zero"},
		{"tcp user timeout negative", []kv{{connkeys.TCPUserTimeout, "-1"}}, connkeys.TCPUserTimeout, "must not be negative"},
		{"tcp user timeout garbage", []kv{{connkeys.TCPUserTimeout, "ten"}}, connkeys.TCPUserTimeout, "not a duration"},
		{"tcp user timeout too large", []kv{{connkeys.TCPUserTimeout, "2147483648"}}, connkeys.TCPUserTimeout, "out of range"},
		{"tcp user timeout below a millisecond", []kv{{connkeys.TCPUserTimeout, "10us"}}, connkeys.TCPUserTimeout, "less than a millisecond"},
		{"backoff max zero", []kv{{connkeys.BackoffMax, "0"}}, connkeys.BackoffMax, "greater than zero"},
		{"backoff max below initial", []kv{{connkeys.BackoffInitial, "500ms"}, {connkeys.BackoffMax, "100ms"}}, connkeys.BackoffMax, connkeys.BackoffInitial},
		{"probe interval zero", []kv{{connkeys.HealthProbeInterval, "0"}}, connkeys.HealthProbeInterval, "greater than zero"},
		{"probe interval garbage", []kv{{connkeys.HealthProbeInterval, "1x"}}, connkeys.HealthProbeInterval, "not a duration"},
		{"probe wait max below the floor", []kv{{connkeys.HealthProbeWaitMax, "1ms"}}, connkeys.HealthProbeWaitMax, "less than 2ms"},
		{"probe wait max zero", []kv{{connkeys.HealthProbeWaitMax, "0"}}, connkeys.HealthProbeWaitMax, "greater than zero"},
		{"probe wait max above the default interval", []kv{{connkeys.HealthProbeWaitMax, "2s"}}, connkeys.HealthProbeWaitMax, connkeys.HealthProbeInterval},
		{"probe wait max above a custom interval", []kv{{connkeys.HealthProbeInterval, "100ms"}, {connkeys.HealthProbeWaitMax, "101ms"}}, connkeys.HealthProbeWaitMax, connkeys.HealthProbeInterval},
		{"probe wait max garbage", []kv{{connkeys.HealthProbeWaitMax, "fast"}}, connkeys.HealthProbeWaitMax, "not a duration"},
		{"pin negative", []kv{{connkeys.PinAfterWrite, "-1"}}, connkeys.PinAfterWrite, "negative"},
		{"pin garbage", []kv{{connkeys.PinAfterWrite, "later"}}, connkeys.PinAfterWrite, "not a duration"},
		{"max lag negative", []kv{{connkeys.MaxLag, "-5s"}}, connkeys.MaxLag, "negative"},
		{"max lag not above default interval", []kv{{connkeys.MaxLag, "500ms"}}, connkeys.MaxLag, connkeys.HealthProbeInterval},
		{"max lag equal to interval", []kv{{connkeys.HealthProbeInterval, "2s"}, {connkeys.MaxLag, "2000"}}, connkeys.MaxLag, connkeys.HealthProbeInterval},
		{"target unknown", []kv{{connkeys.Target, "leader"}}, connkeys.Target, `"leader"`},
		{"target empty", []kv{{connkeys.Target, ""}}, connkeys.Target, "not a known target"},
		{"target_session_attrs unknown", []kv{{connkeys.TargetSessionAttrs, "leader"}}, connkeys.TargetSessionAttrs, `"leader"`},
		{"targets conflict", []kv{{connkeys.Target, "any"}, {connkeys.TargetSessionAttrs, "read-write"}}, connkeys.Target, connkeys.TargetSessionAttrs},
		{"zones mismatch", []kv{{connkeys.Zones, "a,b,c"}}, connkeys.Zones, "3 zones given for 2 hosts"},
		{"patroni not http", []kv{{connkeys.PatroniAPIURLs, "ftp://p1:8008"}}, connkeys.PatroniAPIURLs, "entry 1"},
		{"patroni no host", []kv{{connkeys.PatroniAPIURLs, "http://p1:8008,http://"}}, connkeys.PatroniAPIURLs, "entry 2"},
		{"patroni empty entry", []kv{{connkeys.PatroniAPIURLs, "http://p1:8008,,http://p3:8008"}}, connkeys.PatroniAPIURLs, "entry 2 is empty"},
		{"patroni not a url", []kv{{connkeys.PatroniAPIURLs, "http://p1:port"}}, connkeys.PatroniAPIURLs, "not a valid URL"},
		{"patroni refresh zero", []kv{{connkeys.PatroniRefresh, "0"}}, connkeys.PatroniRefresh, "greater than zero"},
		{"fallback timeout garbage", []kv{{connkeys.FallbackConnectTimeout, "x"}}, connkeys.FallbackConnectTimeout, "not a duration"},
		{"fallback cooldown zero", []kv{{connkeys.FallbackCooldown, "0"}}, connkeys.FallbackCooldown, "greater than zero"},
		{"fallback lifetime negative", []kv{{connkeys.FallbackLifetime, "-1"}}, connkeys.FallbackLifetime, "greater than zero"},
		{"fallback unknown", []kv{{"fallback_cooldwn", "5s"}}, "fallback_cooldwn", "unknown key"},
	}
	for _, tt := range tests {
		for _, f := range withKeys(tt.keys...) {
			t.Run(tt.name+"/"+f.name, func(t *testing.T) {
				c, err := ParseConfig(f.conn)
				if err == nil {
					t.Fatalf("ParseConfig succeeded (%+v), want an error", c)
				}
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("err is %T, want *ConfigError", err)
				}
				if ce.Key != tt.wantKey {
					t.Errorf("Key = %q, want %q", ce.Key, tt.wantKey)
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "pgfailover: invalid connection string: "+tt.wantKey+": ") {
					t.Errorf("message %q does not start by naming the key", msg)
				}
				if !strings.Contains(msg, tt.want) {
					t.Errorf("message %q does not contain %q", msg, tt.want)
				}
				if strings.Contains(msg, testPassword) {
					t.Errorf("message %q contains the password", msg)
				}
			})
		}
	}
}

func TestConfigErrorMessage(t *testing.T) {
	clearPGEnv(t)
	_, err := ParseConfig("postgres://app:" + testPassword + "@db-a/appdb?failover_max_attempts=abc")
	const want = `pgfailover: invalid connection string: failover_max_attempts: "abc" is not a whole number`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
}

// Errors raised by pgx itself keep pgx's explanation but lose the
// connection string.
func TestParseConfigPgxErrors(t *testing.T) {
	clearPGEnv(t)
	tests := []struct {
		name string
		conn string
		want string
	}{
		{"pool key", urlBase + "?pool_max_conns=lots", "pool_max_conns"},
		{"pool key kv", kvBase + " pool_max_conns=lots", "pool_max_conns"},
		{"bad port", "host=db-a port=huge password=" + testPassword, "port"},
		{"port count", "host=db-a,db-b,db-c port=1,2 password=" + testPassword, "port"},
		{"bad sslmode", urlBase + "?sslmode=sometimes", "sslmode"},
		{"bad statement cache", kvBase + " statement_cache_capacity=x", "statement_cache_capacity"},
		{"unterminated quote", "host=db-a password='" + testPassword, "keyword/value"},
		{"no equals", "host=db-a password=" + testPassword + " loose", "keyword/value"},
		{"unterminated ipv6", "postgres://app:" + testPassword + "@[::1/appdb", "URL"},
		{"query without equals", urlBase + "?verbose", "URL"},
		{"bad escape in password", "postgres://app:hunter2%zzsecret@db-a/appdb", "URL"},
		{"password in the port place", "postgres://app:" + testPassword + "/x@db-a/appdb", "port"},
		{"nul byte", urlBase + "?application_name=a%00b", "URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(tt.conn)
			if err == nil {
				t.Fatal("ParseConfig succeeded, want an error")
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err is %T, want *ConfigError", err)
			}
			msg := err.Error()
			for _, secret := range []string{testPassword, "hunter2", "secret"} {
				if strings.Contains(msg, secret) {
					t.Errorf("message %q contains %q", msg, secret)
				}
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("message %q does not mention %q", msg, tt.want)
			}
			var pce *pgconn.ParseConfigError
			if !errors.As(err, &pce) {
				t.Fatalf("no *pgconn.ParseConfigError in %v", err)
			}
			if pce.ConnString != "" {
				t.Errorf("the wrapped pgx error still carries the connection string")
			}
		})
	}
}

// A password equal to a bad value is scrubbed from the message too.
func TestParseConfigErrorScrubsPasswordValue(t *testing.T) {
	clearPGEnv(t)
	_, err := ParseConfig("host=db-a password=" + testPassword + " target=" + testPassword)
	if err == nil || strings.Contains(err.Error(), testPassword) {
		t.Fatalf("err = %v; want an error without the password", err)
	}
}

// validValues holds a value ParseConfig accepts for each of our keys.
var validValues = map[string]string{
	connkeys.Target:                 "read-write",
	connkeys.TargetSessionAttrs:     "replica",
	connkeys.Zone:                   "eu-1a",
	connkeys.Zones:                  "eu-1a,eu-1b",
	connkeys.MaxAttempts:            "4",
	connkeys.ReadyConns:             "1",
	connkeys.MaxDuration:            "10s",
	connkeys.BackoffInitial:         "20ms",
	connkeys.BackoffMax:             "2s",
	connkeys.HealthProbeInterval:    "500ms",
	connkeys.HealthProbeTimeout:     "2s",
	connkeys.HealthProbeWaitMax:     "100ms",
	connkeys.NameRecheckInterval:    "200ms",
	connkeys.PinAfterWrite:          "0",
	connkeys.MaxLag:                 "5s",
	connkeys.ReplicaWait:            "5ms",
	connkeys.OutageReads:            "wait",
	connkeys.PatroniAPIURLs:         "http://p1:8008,http://p2:8008",
	connkeys.PatroniRefresh:         "3s",
	connkeys.PatroniAllowedHosts:    "10.0.0.0/8,*.db.internal",
	connkeys.PatroniZoneTag:         "az",
	connkeys.QueryWaitTimeout:       "3s",
	connkeys.FallbackLocal:          "on",
	connkeys.FallbackConnectTimeout: "2s",
	connkeys.FallbackCooldown:       "10s",
	connkeys.FallbackLifetime:       "15s",
	connkeys.TCPUserTimeout:         "3000",
	connkeys.LazyConnect:            "on",
}

func TestConfigValidValuesCoverEveryKey(t *testing.T) {
	all := connkeys.Names()
	if got, want := slices.Sorted(maps.Keys(validValues)), slices.Sorted(slices.Values(all)); !slices.Equal(got, want) {
		t.Fatalf("validValues keys = %q, want %q", got, want)
	}
}

// The unit-level proof that no key of ours reaches the server: pgconn
// sends exactly RuntimeParams in the startup message, so none of our keys
// may be left there, in the template or in any host's config.
func TestParseConfigRemovesOwnKeys(t *testing.T) {
	clearPGEnv(t)
	check := func(t *testing.T, c *Config, keys []string) {
		t.Helper()
		params := []map[string]string{c.ConnConfig.RuntimeParams}
		for i := range c.Hosts {
			params = append(params, c.poolConfig(c.Hosts[i]).ConnConfig.RuntimeParams)
		}
		for _, rp := range params {
			for _, k := range keys {
				if v, ok := rp[k]; ok {
					t.Errorf("RuntimeParams still holds %s=%q", k, v)
				}
			}
			for k := range rp {
				if connkeys.Ours(k) || k == connkeys.TargetSessionAttrs {
					t.Errorf("RuntimeParams holds our key %s", k)
				}
			}
			if rp["application_name"] != "demo" || rp["search_path"] != "app" {
				t.Errorf("RuntimeParams lost a server parameter: %v", rp)
			}
		}
	}
	server := []kv{{"application_name", "demo"}, {"search_path", "app"}}
	for _, key := range slices.Sorted(maps.Keys(validValues)) {
		keys := append([]kv{{key, validValues[key]}}, server...)
		for _, f := range withKeys(keys...) {
			t.Run(key+"/"+f.name, func(t *testing.T) {
				check(t, mustParse(t, f.conn), []string{key})
			})
		}
	}
	t.Run("all at once", func(t *testing.T) {
		keys := slices.Clone(server)
		for _, k := range slices.Sorted(maps.Keys(validValues)) {
			if k != connkeys.Target { // read-write would disagree with replica
				keys = append(keys, kv{k, validValues[k]})
			}
		}
		for _, f := range withKeys(keys...) {
			t.Run(f.name, func(t *testing.T) {
				check(t, mustParse(t, f.conn), slices.Collect(maps.Keys(validValues)))
			})
		}
	})
	t.Run("percent-encoded key", func(t *testing.T) {
		c := mustParse(t, urlBase+"?fail%6Fver_max_attempts=2&application_name=demo&search_path=app")
		if c.MaxAttempts != 2 {
			t.Errorf("MaxAttempts = %d, want 2", c.MaxAttempts)
		}
		check(t, c, []string{connkeys.MaxAttempts})
	})
}

// pgx never sees target_session_attrs in the string, and the rest of the
// string reaches it unchanged, quoting and escapes included.
func TestParseConfigTargetSessionAttrsRewrite(t *testing.T) {
	clearPGEnv(t)
	tests := []struct {
		name    string
		conn    string
		target  hosthealth.Target
		params  map[string]string
		pgxConn string
	}{
		{"kv middle", `host=db-a target_session_attrs=replica application_name='x y'`, hosthealth.TargetReplica,
			map[string]string{"application_name": "x y"}, `host=db-a  application_name='x y'`},
		{"kv spaces around equals, quoted", `target_session_attrs = 'prefer-replica' host=db-a`, hosthealth.TargetPreferReplica,
			nil, ` host=db-a`},
		{"kv quoted neighbours without spaces", `host='db-a'target_session_attrs='replica'application_name='a\'b'`, hosthealth.TargetReplica,
			map[string]string{"application_name": "a'b"}, `host='db-a'application_name='a\'b'`},
		{"kv escaped space before", `application_name=a\ b target_session_attrs=standby`, hosthealth.TargetReplica,
			map[string]string{"application_name": "a b"}, `application_name=a\ b `},
		{"kv escaped space swallows the key", `application_name=a\ target_session_attrs=standby`, hosthealth.TargetPrimary,
			map[string]string{"application_name": "a target_session_attrs=standby"}, `application_name=a\ target_session_attrs=standby`},
		{"kv empty value swallows the next pair", `application_name= target_session_attrs=standby`, hosthealth.TargetPrimary,
			map[string]string{"application_name": "target_session_attrs=standby"}, `application_name= target_session_attrs=standby`},
		{"kv repeated, last wins", `target_session_attrs=any host=db-a target_session_attrs=replica`, hosthealth.TargetReplica,
			nil, ` host=db-a `},
		{"url middle", "postgres://u:p@db-a,db-b/appdb?application_name=x&target_session_attrs=replica&search_path=s", hosthealth.TargetReplica,
			map[string]string{"application_name": "x", "search_path": "s"}, "postgres://u:p@db-a,db-b/appdb?application_name=x&search_path=s"},
		{"url only key", "postgres://u:p@db-a/appdb?target_session_attrs=prefer-replica", hosthealth.TargetPreferReplica,
			nil, "postgres://u:p@db-a/appdb?"},
		{"url encoded key", "postgres://db-a/appdb?target%5Fsession%5Fattrs=replica", hosthealth.TargetReplica,
			nil, "postgres://db-a/appdb?"},
		{"url question mark in password", "postgres://u:p?q@db-a/appdb?target_session_attrs=replica&application_name=x", hosthealth.TargetReplica,
			map[string]string{"application_name": "x"}, "postgres://u:p?q@db-a/appdb?application_name=x"},
		{"url no path", "postgres://db-a:5432?target_session_attrs=standby", hosthealth.TargetReplica,
			nil, "postgres://db-a:5432?"},
		{"url ipv6", "postgres://[::1]:5432,[::2]/appdb?target_session_attrs=read-only", hosthealth.TargetReplica,
			nil, "postgres://[::1]:5432,[::2]/appdb?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.conn)
			if c.Target != tt.target {
				t.Errorf("Target = %v, want %v", c.Target, tt.target)
			}
			if c.ConnString() != tt.conn {
				t.Errorf("ConnString() = %q, want the original", c.ConnString())
			}
			if got := c.Config.ConnString(); got != tt.pgxConn {
				t.Errorf("string given to pgx = %q, want %q", got, tt.pgxConn)
			}
			want := map[string]string{}
			maps.Copy(want, tt.params)
			if got := c.ConnConfig.RuntimeParams; !maps.Equal(got, want) {
				t.Errorf("RuntimeParams = %v, want %v", got, want)
			}
		})
	}
}

func TestParseConfigPoolSettings(t *testing.T) {
	clearPGEnv(t)
	for _, f := range withKeys(kv{"pool_max_conns", "7"}, kv{"pool_min_conns", "2"}, kv{"pool_max_conn_lifetime", "10m"},
		kv{"pool_max_conn_idle_time", "1m"}, kv{"pool_health_check_period", "15s"}) {
		t.Run(f.name, func(t *testing.T) {
			c := mustParse(t, f.conn)
			for i, pc := range append([]*pgxpool.Config{c.Config}, c.poolConfig(c.Hosts[0]), c.poolConfig(c.Hosts[1])) {
				if pc.MaxConns != 7 || pc.MinConns != 2 || pc.MaxConnLifetime != 10*time.Minute ||
					pc.MaxConnIdleTime != time.Minute || pc.HealthCheckPeriod != 15*time.Second {
					t.Errorf("config %d: MaxConns=%d MinConns=%d MaxConnLifetime=%v MaxConnIdleTime=%v HealthCheckPeriod=%v",
						i, pc.MaxConns, pc.MinConns, pc.MaxConnLifetime, pc.MaxConnIdleTime, pc.HealthCheckPeriod)
				}
				for k := range pc.ConnConfig.RuntimeParams {
					if strings.HasPrefix(k, "pool_") {
						t.Errorf("config %d: RuntimeParams holds %s", i, k)
					}
				}
			}
		})
	}
}

func TestConfigCopy(t *testing.T) {
	clearPGEnv(t)
	orig := mustParse(t, urlBase+"?sslmode=prefer&zones=z1,z2&patroni_api_urls=http://p1:8008&application_name=demo&pool_max_conns=5")
	cp := orig.Copy()

	cp.MaxConns = 99
	cp.ConnConfig.RuntimeParams["application_name"] = "changed"
	cp.ConnConfig.Host = "elsewhere"
	cp.ConnConfig.TLSConfig.ServerName = "elsewhere"
	cp.Hosts[0].Host = "elsewhere"
	cp.Hosts[0].Zone = "changed"
	cp.Hosts[1].tls[0].TLSConfig.ServerName = "elsewhere"
	cp.Hosts[1].tls[1].Port = 1
	cp.Hosts = append(cp.Hosts, HostConfig{Host: "extra", Port: 1})
	cp.patroni.APIURLs[0] = "http://changed"
	cp.MaxAttempts = 1

	checks := []struct {
		name      string
		got, want any
	}{
		{"MaxConns", orig.MaxConns, int32(5)},
		{"application_name", orig.ConnConfig.RuntimeParams["application_name"], "demo"},
		{"template host", orig.ConnConfig.Host, "db-a"},
		{"template ServerName", orig.ConnConfig.TLSConfig.ServerName, "db-a"},
		{"host 0", orig.Hosts[0].Host, "db-a"},
		{"zone 0", orig.Hosts[0].Zone, "z1"},
		{"host 1 TLS ServerName", orig.Hosts[1].tls[0].TLSConfig.ServerName, "db-b"},
		{"host 1 plain port", orig.Hosts[1].tls[1].Port, uint16(5433)},
		{"len(Hosts)", len(orig.Hosts), 2},
		{"patroni url", orig.patroni.APIURLs[0], "http://p1:8008"},
		{"MaxAttempts", orig.MaxAttempts, 8},
		{"copy keeps createdByParseConfig", cp.createdByParseConfig, true},
		{"copy keeps ConnString", cp.ConnString(), orig.ConnString()},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	if (*Config)(nil).Copy() != nil {
		t.Error("nil.Copy() != nil")
	}
}

func TestHostPoolConfig(t *testing.T) {
	clearPGEnv(t)
	tests := []struct {
		name    string
		conn    string
		hosts   []string
		tlsMain bool // the main config uses TLS
		plainFB bool // one plain fallback follows
		tlsFB   bool // one TLS fallback follows
	}{
		{"prefer", "postgres://app@db-a:5432,db-b:5433,[::1]:5434/appdb?sslmode=prefer", []string{"db-a", "db-b", "::1"}, true, true, false},
		{"allow", "host=db-a,db-b,::1 port=5432,5433,5434 sslmode=allow", []string{"db-a", "db-b", "::1"}, false, false, true},
		{"require", "host=db-a,db-b,::1 port=5432,5433,5434 sslmode=require", []string{"db-a", "db-b", "::1"}, true, false, false},
		{"disable", "host=db-a,db-b,::1 port=5432,5433,5434 sslmode=disable", []string{"db-a", "db-b", "::1"}, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.conn)
			if len(c.Hosts) != len(tt.hosts) {
				t.Fatalf("hosts = %q", addrs(c.Hosts))
			}
			for i, h := range c.Hosts {
				pc := c.poolConfig(c.Hosts[i])
				cc := pc.ConnConfig
				if cc.Host != tt.hosts[i] || cc.Port != uint16(5432+i) {
					t.Errorf("host %d: %s:%d, want %s:%d", i, cc.Host, cc.Port, tt.hosts[i], 5432+i)
				}
				if cc.ValidateConnect != nil {
					t.Errorf("host %d: ValidateConnect set", i)
				}
				if (cc.TLSConfig != nil) != tt.tlsMain {
					t.Errorf("host %d: TLS = %v, want %v", i, cc.TLSConfig != nil, tt.tlsMain)
				}
				if cc.TLSConfig != nil {
					want := tt.hosts[i]
					if i == 2 { // pgconn sends no SNI for an IP address
						want = ""
					}
					if cc.TLSConfig.ServerName != want {
						t.Errorf("host %d: ServerName = %q, want %q", i, cc.TLSConfig.ServerName, want)
					}
				}
				wantFB := 0
				if tt.plainFB || tt.tlsFB {
					wantFB = 1
				}
				if len(cc.Fallbacks) != wantFB {
					t.Fatalf("host %d: %d fallbacks, want %d", i, len(cc.Fallbacks), wantFB)
				}
				for _, fb := range cc.Fallbacks {
					if fb.Host != h.Host || fb.Port != h.Port {
						t.Errorf("host %d: fallback to another host %s:%d", i, fb.Host, fb.Port)
					}
					if (fb.TLSConfig != nil) != tt.tlsFB {
						t.Errorf("host %d: fallback TLS = %v, want %v", i, fb.TLSConfig != nil, tt.tlsFB)
					}
				}
				// The result is the caller's own.
				if cc.TLSConfig != nil {
					cc.TLSConfig.ServerName = "mutated"
					if h.tls[0].TLSConfig.ServerName == "mutated" || c.ConnConfig.TLSConfig.ServerName == "mutated" {
						t.Errorf("host %d: TLS config shared with the Config", i)
					}
				}
				for _, fb := range cc.Fallbacks {
					fb.Port = 1
				}
				cc.RuntimeParams["x"] = "y"
				if len(h.tls) > 1 && h.tls[1].Port == 1 {
					t.Errorf("host %d: fallbacks shared with the Config", i)
				}
				if _, ok := c.ConnConfig.RuntimeParams["x"]; ok {
					t.Errorf("host %d: RuntimeParams shared with the template", i)
				}
			}
		})
	}
}

func TestHostPoolConfigHostAddedByHand(t *testing.T) {
	clearPGEnv(t)
	c := mustParse(t, "host=db-a sslmode=require")
	c.Hosts = append(c.Hosts, HostConfig{Host: "db-x", Port: 6000}, HostConfig{Host: "/tmp/sock", Port: 6001})
	pc := c.poolConfig(c.Hosts[1]).ConnConfig
	if pc.Host != "db-x" || pc.Port != 6000 || pc.TLSConfig == nil || pc.TLSConfig.ServerName != "db-x" || pc.Fallbacks != nil {
		t.Errorf("hand-added host: %s:%d TLS=%v fallbacks=%v", pc.Host, pc.Port, pc.TLSConfig != nil, pc.Fallbacks)
	}
	if c.ConnConfig.TLSConfig.ServerName != "db-a" {
		t.Error("template TLS config changed")
	}
	if pc := c.poolConfig(c.Hosts[2]).ConnConfig; pc.TLSConfig != nil {
		t.Error("unix socket host got a TLS config")
	}
}

func TestConfigHostAddr(t *testing.T) {
	tests := []struct {
		h    HostConfig
		want string
	}{
		{HostConfig{Host: "db-a", Port: 5432}, "db-a:5432"},
		{HostConfig{Host: "10.0.0.2", Port: 6432}, "10.0.0.2:6432"},
		{HostConfig{Host: "::1", Port: 5432}, "[::1]:5432"},
		{HostConfig{Host: "/var/run/postgresql", Port: 5432}, "/var/run/postgresql:5432"},
	}
	for _, tt := range tests {
		if got := tt.h.Addr(); got != tt.want {
			t.Errorf("Addr() = %q, want %q", got, tt.want)
		}
	}
}

// tcp_user_timeout=0 keeps the operating system's default, as in libpq.
func TestParseConfigTCPUserTimeoutZero(t *testing.T) {
	clearPGEnv(t)
	for _, f := range withKeys(kv{connkeys.TCPUserTimeout, "0"}) {
		t.Run(f.name, func(t *testing.T) {
			if got := mustParse(t, f.conn).tcpUserTimeout; got != 0 {
				t.Errorf("tcpUserTimeout = %v, want 0", got)
			}
		})
	}
}

// outage_reads takes replica (the default) or wait, and nothing else.
func TestParseConfigOutageReads(t *testing.T) {
	clearPGEnv(t)
	if got := mustParse(t, urlBase).Replica.OutageReads; got != replica.OutageReplica {
		t.Errorf("default outage_reads = %v, want replica", got)
	}
	for v, want := range map[string]replica.OutageReads{"replica": replica.OutageReplica, "wait": replica.OutageWait} {
		for _, f := range withKeys(kv{connkeys.OutageReads, v}) {
			if got := mustParse(t, f.conn).Replica.OutageReads; got != want {
				t.Errorf("%s: outage_reads = %v, want %v", f.name, got, want)
			}
		}
	}
	for _, v := range []string{"", "Wait", "primary", "on", "1", " replica"} {
		for _, f := range withPassword(connkeys.OutageReads, v) {
			t.Run(v+"/"+f.name, func(t *testing.T) {
				_, err := ParseConfig(f.conn)
				checkConfigError(t, err, connkeys.OutageReads, "must be replica or wait")
			})
		}
	}
}
