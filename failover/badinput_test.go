package failover

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover/internal/connkeys"
	"github.com/pgfailover/pgfailover/internal/probe"
)

// Bad input that a connection string can carry: nonsense durations and
// counts, empty and repeated hosts, ports out of range, IPv6 literals, unix
// sockets and zones with spaces. Each string either parses to the result
// documented for it or fails with a *ConfigError that names the key and
// never contains the password. Cases config_test.go already holds are not
// repeated here.

// badInputPassword is put in every string of these tests, so a message that
// repeats it is caught.
const badInputPassword = "Zq9-bad-input-pw"

// checkConfigError checks that err is a *ConfigError for key (or, when pgx
// rejected the string and key is "", one whose message names mention) that
// does not contain the password.
func checkConfigError(t *testing.T, err error, key, mention string) {
	t.Helper()
	if err == nil {
		t.Fatal("ParseConfig succeeded, want an error")
	}
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("err is %T (%v), want *ConfigError", err, err)
	}
	if ce.Key != key {
		t.Errorf("Key = %q, want %q (%v)", ce.Key, key, err)
	}
	msg := err.Error()
	if key != "" && !strings.HasPrefix(msg, "pgfailover: invalid connection string: "+key+": ") {
		t.Errorf("message %q does not start by naming %s", msg, key)
	}
	if !strings.Contains(msg, mention) {
		t.Errorf("message %q does not mention %q", msg, mention)
	}
	for _, secret := range []string{badInputPassword, testPassword} {
		if strings.Contains(msg, secret) {
			t.Errorf("message %q contains the password", msg)
		}
	}
}

// withPassword returns the two forms of a string naming db-a and db-b with
// badInputPassword and the given key set to v.
func withPassword(key, v string) []form {
	return []form{
		{"url", "postgres://app:" + badInputPassword + "@db-a:5432,db-b:5433/appdb?" + urlEscape(key) + "=" + urlEscape(v)},
		{"kv", "host=db-a,db-b port=5432,5433 user=app password=" + badInputPassword + " " + key + "=" + kvQuote(v)},
	}
}

// durationKeys are our keys that take a duration, with how to read each
// back, whether it must be greater than zero (else zero is allowed), and
// the largest value it takes when given alone (0: no bound).
var durationKeys = []struct {
	key      string
	positive bool
	get      func(*Config) time.Duration
	atMost   time.Duration
}{
	{connkeys.MaxDuration, true, func(c *Config) time.Duration { return c.MaxDuration }, 0},
	{connkeys.BackoffInitial, true, func(c *Config) time.Duration { return c.BackoffInitial }, 0},
	{connkeys.BackoffMax, true, func(c *Config) time.Duration { return c.BackoffMax }, 0},
	{connkeys.HealthProbeInterval, true, func(c *Config) time.Duration { return c.HealthProbeInterval }, 0},
	{connkeys.HealthProbeTimeout, true, func(c *Config) time.Duration { return c.HealthProbeTimeout }, 0},
	{connkeys.HealthProbeWaitMax, true, func(c *Config) time.Duration { return c.HealthProbeWaitMax }, connkeys.DefaultHealthProbeInterval},
	{connkeys.NameRecheckInterval, false, func(c *Config) time.Duration { return c.NameRecheckInterval }, 0},
	{connkeys.PinAfterWrite, false, func(c *Config) time.Duration { return c.Replica.PinAfterWrite }, 0},
	{connkeys.MaxLag, false, func(c *Config) time.Duration { return c.Replica.MaxLag }, 0},
	{connkeys.ReplicaWait, false, func(c *Config) time.Duration { return c.Replica.Wait }, 0},
	{connkeys.PatroniRefresh, true, func(c *Config) time.Duration { return c.patroni.Refresh }, 0},
	{connkeys.QueryWaitTimeout, true, func(c *Config) time.Duration { return c.patroni.QueryWait }, 0},
	{connkeys.FallbackConnectTimeout, true, func(c *Config) time.Duration { return c.patroni.FallbackConnectTimeout }, 0},
	{connkeys.FallbackCooldown, true, func(c *Config) time.Duration { return c.patroni.FallbackCooldown }, 0},
	{connkeys.FallbackLifetime, true, func(c *Config) time.Duration { return c.patroni.FallbackLifetime }, 0},
	{connkeys.TCPUserTimeout, false, func(c *Config) time.Duration { return c.tcpUserTimeout }, 0},
}

func TestConfigDurationKeysCoverEveryDurationKey(t *testing.T) {
	var got []string
	for _, d := range durationKeys {
		got = append(got, d.key)
	}
	// Every key of ours but these takes a duration.
	notDurations := []string{connkeys.Target, connkeys.TargetSessionAttrs, connkeys.Zone, connkeys.Zones, connkeys.MaxAttempts, connkeys.ReadyConns, connkeys.PatroniAPIURLs,
		connkeys.PatroniAllowedHosts, connkeys.PatroniZoneTag, connkeys.FallbackLocal, connkeys.LazyConnect, connkeys.OutageReads}
	var want []string
	for _, k := range connkeys.Names() {
		if !slices.Contains(notDurations, k) {
			want = append(want, k)
		}
	}
	if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("durationKeys = %q, want %q", got, want)
	}
}

// Values no duration key accepts, whatever its range.
func TestParseConfigNonsenseDurations(t *testing.T) {
	clearPGEnv(t)
	nonsense := []string{
		"1x", "1e9h", "1e3", "1e3ms", "", " ", " 5s", "5s ", "\t5s", "5 s", "0x10", "1.5", "5S", "1_000",
		"NaN", "inf", "5ms5", "1h-1m", "\u0663", // ARABIC-INDIC DIGIT THREE
		"2562047h48m", // one minute past the largest time.Duration
	}
	for _, d := range durationKeys {
		for _, v := range nonsense {
			for _, f := range withPassword(d.key, v) {
				t.Run(d.key+"="+v+"/"+f.name, func(t *testing.T) {
					_, err := ParseConfig(f.conn)
					checkConfigError(t, err, d.key, "is not a duration")
				})
			}
		}
	}
}

func TestParseConfigDurationRanges(t *testing.T) {
	clearPGEnv(t)
	for _, d := range durationKeys {
		negative, zero := "must not be negative", ""
		if d.positive {
			negative, zero = "must be greater than zero", "must be greater than zero"
		}
		tests := []struct {
			in      string
			want    time.Duration
			problem string // "" when accepted
		}{
			{"-5s", 0, negative},
			{"-1ns", 0, negative},
			{"-9223372036854", 0, negative},
			{"-0", 0, zero},
			{"0s", 0, zero},
			{"9223372036855", 0, "is out of range"},        // milliseconds past the largest time.Duration
			{"-9223372036855", 0, "is out of range"},       // and below the smallest
			{"99999999999999999999", 0, "is out of range"}, // past int64 itself
			{"+5s", 5 * time.Second, ""},
			{"+5000", 5 * time.Second, ""},
			{"0005000", 5 * time.Second, ""},
			{"5.s", 5 * time.Second, ""},
			{"1m.5s", 60500 * time.Millisecond, ""},
		}
		for _, tt := range tests {
			if d.atMost > 0 && tt.problem == "" && tt.want > d.atMost {
				tt.problem = "is greater than"
			}
			for _, f := range withPassword(d.key, tt.in) {
				t.Run(d.key+"="+tt.in+"/"+f.name, func(t *testing.T) {
					c, err := ParseConfig(f.conn)
					if tt.problem != "" {
						checkConfigError(t, err, d.key, tt.problem)
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					if got := d.get(c); got != tt.want {
						t.Errorf("%s = %v, want %v", d.key, got, tt.want)
					}
				})
			}
		}
	}
}

// The largest durations Go can write are accepted where the key has no
// upper bound; tcp_user_timeout is bounded by what the socket option holds.
func TestParseConfigHugeDurations(t *testing.T) {
	clearPGEnv(t)
	const largest = time.Duration(1<<63 - 1)
	tests := []struct {
		key, in string
		want    time.Duration
		problem string
	}{
		{connkeys.MaxDuration, "9223372036854775807ns", largest, ""},
		{connkeys.MaxDuration, "2562047h47m16.854775807s", largest, ""},
		{connkeys.MaxDuration, "9223372036854", 9223372036854 * time.Millisecond, ""},
		{connkeys.BackoffInitial, "2562047h", 2562047 * time.Hour, ""},
		{connkeys.PinAfterWrite, "9223372036854775807ns", largest, ""},
		{connkeys.TCPUserTimeout, "2147483647", 2147483647 * time.Millisecond, ""},
		{connkeys.TCPUserTimeout, "2147483647ms", 2147483647 * time.Millisecond, ""},
		{connkeys.TCPUserTimeout, "2147483647999999ns", 2147483647999999, ""}, // below the next millisecond
		{connkeys.TCPUserTimeout, "2147483648ms", 0, "is out of range"},
		{connkeys.TCPUserTimeout, "596h31m23.648s", 0, "is out of range"}, // 2^31 ms
		{connkeys.TCPUserTimeout, "9223372036854775807ns", 0, "is out of range"},
		{connkeys.TCPUserTimeout, "9223372036854", 0, "is out of range"},
		{connkeys.TCPUserTimeout, "999999ns", 0, "less than a millisecond"},
		{connkeys.TCPUserTimeout, "1ns", 0, "less than a millisecond"},
		{connkeys.TCPUserTimeout, "1ms", time.Millisecond, ""},
		{connkeys.TCPUserTimeout, "1500us", 1500 * time.Microsecond, ""},
		{connkeys.TCPUserTimeout, "+0", 0, ""},
	}
	for _, tt := range tests {
		for _, f := range withPassword(tt.key, tt.in) {
			t.Run(tt.key+"="+tt.in+"/"+f.name, func(t *testing.T) {
				c, err := ParseConfig(f.conn)
				if tt.problem != "" {
					checkConfigError(t, err, tt.key, tt.problem)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range durationKeys {
					if d.key == tt.key {
						if got := d.get(c); got != tt.want {
							t.Errorf("%s = %v, want %v", tt.key, got, tt.want)
						}
					}
				}
			})
		}
	}
}

func TestParseConfigAttemptsEdges(t *testing.T) {
	clearPGEnv(t)
	tests := []struct {
		in      string
		want    int
		problem string
	}{
		{"-0", 0, "at least 1"},
		{"-2147483648", 0, "at least 1"},
		{"-2147483649", 0, "is out of range"},
		{"2147483648", 0, "is out of range"},
		{"9223372036854775808", 0, "is out of range"},
		{"1e3", 0, "is not a whole number"},
		{"0x10", 0, "is not a whole number"},
		{" 3", 0, "is not a whole number"},
		{"3 ", 0, "is not a whole number"},
		{"3s", 0, "is not a whole number"},
		{"1_000", 0, "is not a whole number"},
		{"\u0663", 0, "is not a whole number"},
		{"+3", 3, ""},
		{"03", 3, ""},
		{"1", 1, ""},
		{"2147483647", 2147483647, ""},
	}
	for _, tt := range tests {
		for _, f := range withPassword(connkeys.MaxAttempts, tt.in) {
			t.Run(tt.in+"/"+f.name, func(t *testing.T) {
				c, err := ParseConfig(f.conn)
				if tt.problem != "" {
					checkConfigError(t, err, connkeys.MaxAttempts, tt.problem)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if c.MaxAttempts != tt.want {
					t.Errorf("MaxAttempts = %d, want %d", c.MaxAttempts, tt.want)
				}
			})
		}
	}
	t.Run("percent-encoded key named decoded", func(t *testing.T) {
		_, err := ParseConfig("postgres://app:" + badInputPassword + "@db-a/appdb?fail%6Fver_max_attempts=-1")
		checkConfigError(t, err, connkeys.MaxAttempts, "at least 1")
	})
	t.Run("last of a repeated key counts", func(t *testing.T) {
		_, err := ParseConfig("host=db-a password=" + badInputPassword + " failover_max_attempts=3 failover_max_attempts=0")
		checkConfigError(t, err, connkeys.MaxAttempts, "at least 1")
	})
}

// TestReadyConnsBadValues: failover_ready_conns is a whole number, 0 or
// more, named in the error with no password; unset, it is the pool's
// pool_max_conns.
func TestReadyConnsBadValues(t *testing.T) {
	clearPGEnv(t)
	tests := []struct {
		in      string
		want    int
		problem string
	}{
		{"-1", 0, "is negative"},
		{"2147483648", 0, "is out of range"},
		{"two", 0, "is not a whole number"},
		{"1.5", 0, "is not a whole number"},
		{"0", 0, ""},
		{"2", 2, ""},
	}
	for _, tt := range tests {
		for _, f := range withPassword(connkeys.ReadyConns, tt.in) {
			t.Run(tt.in+"/"+f.name, func(t *testing.T) {
				c, err := ParseConfig(f.conn)
				if tt.problem != "" {
					checkConfigError(t, err, connkeys.ReadyConns, tt.problem)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if c.ReadyConns != tt.want {
					t.Errorf("ReadyConns = %d, want %d", c.ReadyConns, tt.want)
				}
			})
		}
	}
	c, err := ParseConfig("host=db-a pool_max_conns=7")
	if err != nil {
		t.Fatal(err)
	}
	if c.ReadyConns != 7 {
		t.Errorf("ReadyConns unset = %d, want pool_max_conns, 7", c.ReadyConns)
	}
}

// An empty host list, or an empty entry in one, means pgconn's default
// host, as in libpq: a unix socket directory when one exists, else
// localhost.
func TestParseConfigEmptyHosts(t *testing.T) {
	clearPGEnv(t)
	def, err := pgconn.ParseConfig("")
	if err != nil {
		t.Fatal(err)
	}
	at := func(port uint16) string { return HostConfig{Host: def.Host, Port: port}.Addr() }
	pw := badInputPassword
	tests := []struct {
		name string
		conn string
		want []string
	}{
		{"kv quoted empty", "host='' user=app password=" + pw, []string{at(5432)}},
		{"kv empty at the end", "user=app password=" + pw + " host=", []string{at(5432)}},
		{"kv no host key", "user=app password=" + pw, []string{at(5432)}},
		{"kv two empty entries, one kept", "host=, password=" + pw, []string{at(5432)}},
		{"kv empty entry first", "host=,db-b password=" + pw, []string{at(5432), "db-b:5432"}},
		{"kv empty entry with its own port", "host=db-a, port=5432,5433 password=" + pw, []string{"db-a:5432", at(5433)}},
		{"url no host", "postgres://app:" + pw + "@/appdb", []string{at(5432)}},
		{"url no authority", "postgres:///appdb?password=" + pw, []string{at(5432)}},
		{"url port only", "postgres://app:" + pw + "@:5433/appdb", []string{at(5433)}},
		{"url empty entry first", "postgres://app:" + pw + "@,db-b/appdb", []string{at(5432), "db-b:5432"}},
		{"url empty port is the default", "postgres://app:" + pw + "@db-a:,db-b:/appdb", []string{"db-a:5432", "db-b:5432"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.conn)
			if got := addrs(c.Hosts); !slices.Equal(got, tt.want) {
				t.Fatalf("hosts = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseConfigDuplicateHostsEdges(t *testing.T) {
	clearPGEnv(t)
	pw := badInputPassword
	tests := []struct {
		name  string
		conn  string
		want  []string
		zones []string // nil: not checked
	}{
		{"first place kept", "host=db-b,db-a,db-b,db-a port=5432 password=" + pw, []string{"db-b:5432", "db-a:5432"}, nil},
		{"duplicate only by the port list", "host=db-a,db-b,db-a port=5432,5433,5433 password=" + pw, []string{"db-a:5432", "db-b:5433", "db-a:5433"}, nil},
		{"url duplicate through the default port", "postgres://app:" + pw + "@db-a:5432,db-a/appdb", []string{"db-a:5432"}, nil},
		{"url ipv6 duplicate", "postgres://app:" + pw + "@[::1]:5432,[::1]:5432/appdb", []string{"[::1]:5432"}, nil},
		{"kv ipv6 duplicate", "host=::1,::1 port=5432 password=" + pw, []string{"[::1]:5432"}, nil},
		{"socket duplicate", "host=/var/run/postgresql,/var/run/postgresql port=5432 password=" + pw, []string{"/var/run/postgresql:5432"}, nil},
		{"url socket duplicate", "postgres://app:" + pw + "@/appdb?host=/tmp,/tmp&port=5432", []string{"/tmp:5432"}, nil},
		{"duplicate with allow keeps its zone order", "host=db-a,db-b,db-a,db-c port=5432 sslmode=allow zones=z1,z2,z3,z4 password=" + pw,
			[]string{"db-a:5432", "db-b:5432", "db-c:5432"}, []string{"z1", "z2", "z4"}},
		{"all the same", "host=db-a,db-a,db-a port=5432 zones=z1,z2,z3 password=" + pw, []string{"db-a:5432"}, []string{"z1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.conn)
			if got := addrs(c.Hosts); !slices.Equal(got, tt.want) {
				t.Fatalf("hosts = %q, want %q", got, tt.want)
			}
			if tt.zones != nil {
				var got []string
				for _, h := range c.Hosts {
					got = append(got, h.Zone)
				}
				if !slices.Equal(got, tt.zones) {
					t.Errorf("zones = %q, want %q", got, tt.zones)
				}
			}
			for _, h := range c.Hosts {
				for _, v := range h.tls {
					if v.Host != h.Host || v.Port != h.Port {
						t.Errorf("host %s holds a variant for %s:%d", h.Addr(), v.Host, v.Port)
					}
				}
			}
		})
	}
}

// pgx rejects a port outside 1..65535, or one that is not a number, before
// any key of ours is read; its message names the port and the ConfigError
// has no Key.
func TestParseConfigPortsOutOfRange(t *testing.T) {
	clearPGEnv(t)
	pw := badInputPassword
	bad := []struct{ name, conn string }{
		{"kv zero", "host=db-a port=0 password=" + pw},
		{"kv above 65535", "host=db-a port=70000 password=" + pw},
		{"kv 65536", "host=db-a port=65536 password=" + pw},
		{"kv negative", "host=db-a port=-1 password=" + pw},
		{"kv trailing letter", "host=db-a port=5432a password=" + pw},
		{"kv trailing space", "host=db-a port='5432 ' password=" + pw},
		{"kv second of a list", "host=db-a,db-b port=5432,0 password=" + pw},
		// libpq's grammar: an empty value takes the next pair as its value,
		// so here the port is the text "password=...", which must not be
		// quoted back.
		{"kv empty swallows the password", "host=db-a port= password=" + pw},
		{"url above 65535", "postgres://app:" + pw + "@a:99999/appdb"},
		{"url zero", "postgres://app:" + pw + "@a:0/appdb"},
		{"url negative", "postgres://app:" + pw + "@a:-1/appdb"},
		{"url 65536", "postgres://app:" + pw + "@a:65536/appdb"},
		{"url letters", "postgres://app:" + pw + "@a:5432a/appdb"},
		{"url second of a list", "postgres://app:" + pw + "@a:5432,b:70000/appdb"},
		{"url ipv6 zero", "postgres://app:" + pw + "@[::1]:0/appdb"},
		{"url ipv6 above 65535", "postgres://app:" + pw + "@[::1]:99999/appdb"},
		{"url query port zero", "postgres://app:" + pw + "@/appdb?port=0"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(tt.conn)
			checkConfigError(t, err, "", "port")
		})
	}
	good := []struct {
		name, conn string
		want       []string
	}{
		{"kv 65535", "host=db-a port=65535 password=" + pw, []string{"db-a:65535"}},
		{"kv 1", "host=db-a port=1 password=" + pw, []string{"db-a:1"}},
		{"url 65535", "postgres://app:" + pw + "@a:65535/appdb", []string{"a:65535"}},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			if got := addrs(mustParse(t, tt.conn).Hosts); !slices.Equal(got, tt.want) {
				t.Fatalf("hosts = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseConfigIPv6Edges(t *testing.T) {
	clearPGEnv(t)
	pw := badInputPassword
	tests := []struct {
		name string
		conn string
		want []string
	}{
		{"url zone escaped", "postgres://app:" + pw + "@[::1]:5432,[fe80::1%25eth0]:5433/appdb", []string{"[::1]:5432", "[fe80::1%eth0]:5433"}},
		{"url default port", "postgres://app:" + pw + "@[::1]/appdb", []string{"[::1]:5432"}},
		{"url mixed with names", "postgres://app:" + pw + "@db-a,[fd00::2]:5433,10.0.0.3:5434/appdb", []string{"db-a:5432", "[fd00::2]:5433", "10.0.0.3:5434"}},
		{"kv with zone", "host=::1,fe80::1%eth0 port=5432,5433 password=" + pw, []string{"[::1]:5432", "[fe80::1%eth0]:5433"}},
		{"kv full form", "host=2001:db8:0:0:0:0:0:1 port=5432 password=" + pw, []string{"[2001:db8:0:0:0:0:0:1]:5432"}},
		{"kv ipv4-mapped", "host=::ffff:10.0.0.1 password=" + pw, []string{"[::ffff:10.0.0.1]:5432"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.conn)
			if got := addrs(c.Hosts); !slices.Equal(got, tt.want) {
				t.Fatalf("hosts = %q, want %q", got, tt.want)
			}
			for i, h := range c.Hosts {
				if hc := c.poolConfig(c.Hosts[i]).ConnConfig; hc.Host != h.Host || hc.Port != h.Port {
					t.Errorf("host pool %d dials %s:%d, want %s", i, hc.Host, hc.Port, h.Addr())
				}
			}
		})
	}
	// An unescaped % in a URL is not a zone but a bad escape.
	bad := []struct{ name, conn, mention string }{
		{"url zone unescaped", "postgres://app:" + pw + "@[fe80::1%eth0]:5433/appdb", "URL"},
		{"url unterminated list", "postgres://app:" + pw + "@[::1]:5432,[::2/appdb", "URL"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(tt.conn)
			checkConfigError(t, err, "", tt.mention)
		})
	}
}

func TestParseConfigUnixSocketEdges(t *testing.T) {
	clearPGEnv(t)
	pw := badInputPassword
	tests := []struct {
		name string
		conn string
		want []string
	}{
		{"url host percent-encoded", "postgres://app:" + pw + "@%2Fvar%2Frun%2Fpostgresql/appdb", []string{"/var/run/postgresql:5432"}},
		{"url host percent-encoded with port", "postgres://app:" + pw + "@%2Fvar%2Frun%2Fpostgresql:5433/appdb", []string{"/var/run/postgresql:5433"}},
		{"url host in query percent-encoded", "postgres://app:" + pw + "@/appdb?host=%2Fvar%2Frun%2Fpostgresql", []string{"/var/run/postgresql:5432"}},
		{"url socket and tcp", "postgres://app:" + pw + "@%2Ftmp%2Fpg,db-b:5433/appdb", []string{"/tmp/pg:5432", "db-b:5433"}},
		{"kv socket with sslmode=require", "host=/var/run/postgresql port=5432 sslmode=require password=" + pw, []string{"/var/run/postgresql:5432"}},
		{"kv path with a space", "host='/run/my pg' port=5432 password=" + pw, []string{"/run/my pg:5432"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.conn)
			if got := addrs(c.Hosts); !slices.Equal(got, tt.want) {
				t.Fatalf("hosts = %q, want %q", got, tt.want)
			}
			for i, h := range c.Hosts {
				if !strings.HasPrefix(h.Host, "/") {
					continue
				}
				// A socket is dialled once, without TLS, whatever sslmode says.
				if len(h.tls) != 1 || h.tls[0].TLSConfig != nil {
					t.Errorf("socket %s: %d variants, first with TLS %v; want one plain", h.Addr(), len(h.tls), h.tls[0].TLSConfig != nil)
				}
				if hc := c.poolConfig(c.Hosts[i]).ConnConfig; hc.TLSConfig != nil || hc.Fallbacks != nil {
					t.Errorf("socket %s: host pool has TLS or fallbacks", h.Addr())
				}
			}
		})
	}
}

// Zones are taken as written: spaces inside a zone are part of its name.
func TestParseConfigZonesWithSpaces(t *testing.T) {
	clearPGEnv(t)
	pw := badInputPassword
	tests := []struct {
		name  string
		conn  string
		zone  string
		zones []string
	}{
		{"kv quoted", "host=db-a,db-b zone='eu 1a' zones='eu 1a,eu 1b' password=" + pw, "eu 1a", []string{"eu 1a", "eu 1b"}},
		{"kv escaped", `host=db-a,db-b zones=eu\ 1a,eu\ 1b password=` + pw, "", []string{"eu 1a", "eu 1b"}},
		{"url encoded", "postgres://app:" + pw + "@db-a,db-b/appdb?zone=eu%201a&zones=eu%201a,eu%201b", "eu 1a", []string{"eu 1a", "eu 1b"}},
		{"only commas", "host=db-a,db-b zones=',' password=" + pw, "", []string{"", ""}},
		{"empty", "host=db-a,db-b zones='' password=" + pw, "", []string{"", ""}},
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
				t.Errorf("zones = %q, want %q", got, tt.zones)
			}
		})
	}
	t.Run("count still checked", func(t *testing.T) {
		_, err := ParseConfig("host=db-a,db-b zones='eu 1a,eu 1b,eu 1c' password=" + pw)
		checkConfigError(t, err, connkeys.Zones, "3 zones given for 2 hosts")
	})
}

// TestNewWithConfigChecksDurationsSetInCode: a duration or count field set in code
// after ParseConfig is held to the range ParseConfig holds its key to, and
// NewWithConfig's error names the key and the field. The values at the
// ends of each range are taken (lazy_connect=on, so that nothing is
// dialled).
func TestNewWithConfigChecksDurationsSetInCode(t *testing.T) {
	tests := []struct {
		name  string
		set   func(*Config)
		key   string // "" when the Config is good
		field string
	}{
		{"wait max below the floor", func(c *Config) { c.HealthProbeWaitMax = time.Millisecond }, connkeys.HealthProbeWaitMax, "HealthProbeWaitMax"},
		{"wait max zero", func(c *Config) { c.HealthProbeWaitMax = 0 }, connkeys.HealthProbeWaitMax, "HealthProbeWaitMax"},
		{"wait max negative", func(c *Config) { c.HealthProbeWaitMax = -time.Second }, connkeys.HealthProbeWaitMax, "HealthProbeWaitMax"},
		{"wait max above the probe interval", func(c *Config) { c.HealthProbeWaitMax = 2 * time.Second }, connkeys.HealthProbeWaitMax, "HealthProbeWaitMax"},
		{"probe interval lowered below the wait max", func(c *Config) { c.HealthProbeInterval = 20 * time.Millisecond }, connkeys.HealthProbeWaitMax, "HealthProbeInterval"},
		{"replica wait negative", func(c *Config) { c.Replica.Wait = -time.Millisecond }, connkeys.ReplicaWait, ""},
		{"wait max at the floor", func(c *Config) { c.HealthProbeWaitMax = probe.Floor }, "", ""},
		{"wait max at the probe interval", func(c *Config) { c.HealthProbeWaitMax = c.HealthProbeInterval }, "", ""},
		{"both lowered together", func(c *Config) {
			c.HealthProbeInterval, c.HealthProbeWaitMax = 20*time.Millisecond, 20*time.Millisecond
		}, "", ""},
		{"replica wait zero", func(c *Config) { c.Replica.Wait = 0 }, "", ""},
		{"name recheck interval negative", func(c *Config) { c.NameRecheckInterval = -time.Millisecond }, connkeys.NameRecheckInterval, "NameRecheckInterval"},
		{"name recheck interval zero", func(c *Config) { c.NameRecheckInterval = 0 }, "", ""},
		{"ready conns negative", func(c *Config) { c.ReadyConns = -1 }, connkeys.ReadyConns, "ReadyConns"},
		{"ready conns zero", func(c *Config) { c.ReadyConns = 0 }, "", ""},
		{"max attempts zero", func(c *Config) { c.MaxAttempts = 0 }, connkeys.MaxAttempts, "MaxAttempts"},
		{"max attempts one", func(c *Config) { c.MaxAttempts = 1 }, "", ""},
		{"max duration zero", func(c *Config) { c.MaxDuration = 0 }, connkeys.MaxDuration, "MaxDuration"},
		{"backoff initial zero", func(c *Config) { c.BackoffInitial = 0 }, connkeys.BackoffInitial, "BackoffInitial"},
		{"backoff max below initial", func(c *Config) { c.BackoffMax = c.BackoffInitial / 2 }, connkeys.BackoffMax, "BackoffMax"},
		{"backoff max at initial", func(c *Config) { c.BackoffMax = c.BackoffInitial }, "", ""},
		{"probe interval zero", func(c *Config) { c.HealthProbeInterval = 0 }, connkeys.HealthProbeInterval, "HealthProbeInterval"},
		{"probe timeout negative", func(c *Config) { c.HealthProbeTimeout = -time.Second }, connkeys.HealthProbeTimeout, "HealthProbeTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig("postgres://app:" + badInputPassword + "@127.0.0.1:1/db?lazy_connect=on")
			if err != nil {
				t.Fatal(err)
			}
			tt.set(cfg)
			pool, err := NewWithConfig(t.Context(), cfg)
			if tt.key == "" {
				if err != nil {
					t.Fatalf("NewWithConfig: %v, want a Pool", err)
				}
				pool.Close()
				return
			}
			if pool != nil {
				pool.Close()
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != tt.key {
				t.Fatalf("NewWithConfig: %v, want a *ConfigError naming %s", err, tt.key)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.field) || strings.Contains(msg, badInputPassword) {
				t.Errorf("message %q: want it to name %s and not the password", msg, tt.field)
			}
		})
	}
}
