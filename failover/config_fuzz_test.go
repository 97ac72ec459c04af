package failover

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover/internal/connkeys"
)

// FuzzParseConfig feeds ParseConfig arbitrary strings. It checks that
// ParseConfig never panics, that a Config it returns is whole and carries no
// key of ours in RuntimeParams, and that no error message repeats the
// password of a URL. internal/connstr's FuzzScan holds the scanner to
// pgconn's reading of the same strings.
//
// The second input is a password: the fuzz body also parses
// "postgres://user:" + pw + "@" + s and requires the message of any error
// not to contain pw (nor its decoded form).
func FuzzParseConfig(f *testing.F) {
	seeds := []struct{ s, pw string }{
		{"host=db-a,db-b port=5432,5433 target=replica zones=z1,z2", "hunter2-secret"},
		{"postgres://app:pw@db-a:5432,db-b:5433/app?target_session_attrs=replica&zone=eu", "hunter2-secret"},
		{"db-a:5432,[::1]:5433/app?failover_max_attempts=abc", "hunter2-secret"},
		{"db-a/app?max_lag=500ms&health_probe_interval=1s", "correct horse"},
		{"db-a/app?zones=a,b,c", "p%41ssw0rd!"},
		{"db-a/app?patroni_api_urls=http://u:pw@p1:8008,ftp://x&fallback_cooldown=5", "s3cr3t-pass"},
		{"db-a/app?pool_max_conns=lots", "s3cr3t-pass"},
		{"[::1/app", "s3cr3t-pass"},
		{"db-a:notaport/app", "s3cr3t-pass"},
		{"host=a target_session_attrs='prefer-replica' application_name=a\\ b", "s3cr3t-pass"},
		{"host='a'target_session_attrs='x\\'y'", "s3cr3t-pass"},
		{"host= target_session_attrs=replica", "s3cr3t-pass"},
		{"db-a/app?target%5Fsession%5Fattrs=standby&pin_after_write=0", "s3cr3t:pass"},
		{"db-a/app?sslmode=prefer&target=any&target_session_attrs=any", "s3cr3t?pass"},
		{"host=db-a port= password=s3cr3t-pass", "s3cr3t-pass"},
		{"host=db-a,db-b zone= password=s3cr3t-pass zones=' a , b '", "s3cr3t-pass"},
		{"host=,db-b port=5432,0", "s3cr3t-pass"},
		{"[::1]:5432,[fe80::1%25eth0]:5433,[fe80::1%eth0]/app", "s3cr3t-pass"},
		{"%2Fvar%2Frun%2Fpostgresql:5433,db-a:99999/app?host=/tmp,/tmp", "s3cr3t-pass"},
		{"/app?tcp_user_timeout=2147483648ms&failover_max_duration=2562047h48m&failover_max_attempts=-0", "s3cr3t-pass"},
		{"db-a/app?failover_backoff_initial=9223372036854775807ns&pin_after_write=-9223372036855", "s3cr3t-pass"},
		{"", ""},
	}
	for _, sd := range seeds {
		f.Add(sd.s, sd.pw)
	}
	f.Fuzz(func(t *testing.T, s, pw string) {
		if readsFiles(s) || readsFiles(pw) {
			t.Skip("names a file; pgconn would read it")
		}
		checkParse(t, s)
		checkPasswordNotInError(t, s, pw)
	})
}

// readsFiles reports whether s may name a key that makes pgconn read a
// file. A fuzzer that found sslrootcert=/dev/zero would hang the run.
func readsFiles(s string) bool {
	plain := strings.ReplaceAll(decodeLoosely(s), `\`, "")
	for _, k := range []string{"sslrootcert", "sslcert", "sslkey", "servicefile", "passfile", "service"} {
		if strings.Contains(plain, k) {
			return true
		}
	}
	return false
}

// decodeLoosely decodes the %XX escapes it can and keeps everything else.
func decodeLoosely(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if c, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(c))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// pgxKeys are the keys pgx and pgxpool take out of RuntimeParams.
var pgxKeys = []string{
	"statement_cache_capacity", "description_cache_capacity", "default_query_exec_mode",
	"pool_max_conns", "pool_min_conns", "pool_min_idle_conns", "pool_max_conn_lifetime",
	"pool_max_conn_idle_time", "pool_health_check_period", "pool_max_conn_lifetime_jitter", "pool_ping_timeout",
}

func checkParse(t *testing.T, s string) {
	pc, perr := pgconn.ParseConfig(s)
	c, err := ParseConfig(s)
	if err != nil {
		if _, ok := err.(*ConfigError); !ok {
			t.Fatalf("error is %T, want *ConfigError", err)
		}
		return
	}
	if len(c.Hosts) == 0 {
		t.Fatal("no hosts")
	}
	if perr == nil {
		// Rewriting the string must not change anything else pgconn reads.
		want := maps.Clone(pc.RuntimeParams)
		maps.DeleteFunc(want, func(k, _ string) bool {
			return connkeys.Ours(k) || slices.Contains(pgxKeys, k)
		})
		if got := c.ConnConfig.RuntimeParams; !maps.Equal(got, want) {
			t.Fatalf("RuntimeParams = %q, pgconn alone gives %q", got, want)
		}
		if got, want := addrs(c.Hosts), addrs(dedupHosts(splitHosts(pc))); !slices.Equal(got, want) {
			t.Fatalf("hosts = %q, pgconn alone gives %q", got, want)
		}
	}
	cc := c.ConnConfig
	if cc.Fallbacks != nil || cc.ValidateConnect != nil {
		t.Fatal("template keeps Fallbacks or ValidateConnect")
	}
	for k := range cc.RuntimeParams {
		if connkeys.Ours(k) || k == connkeys.TargetSessionAttrs {
			t.Fatalf("RuntimeParams holds our key %q", k)
		}
	}
	seen := map[string]bool{}
	for i, h := range c.Hosts {
		if seen[h.Addr()] {
			t.Fatalf("host %s listed twice", h.Addr())
		}
		seen[h.Addr()] = true
		if len(h.tls) == 0 || len(h.tls) > 2 {
			t.Fatalf("host %s has %d variants", h.Addr(), len(h.tls))
		}
		hc := c.poolConfig(c.Hosts[i]).ConnConfig
		if hc.Host != h.Host || hc.Port != h.Port {
			t.Fatalf("host pool %d dials %s:%d, want %s", i, hc.Host, hc.Port, h.Addr())
		}
		for _, fb := range hc.Fallbacks {
			if fb.Host != h.Host || fb.Port != h.Port {
				t.Fatalf("host pool %d falls back to %s:%d", i, fb.Host, fb.Port)
			}
		}
	}
	if c.MaxAttempts < 1 || c.MaxDuration <= 0 || c.BackoffInitial <= 0 || c.BackoffMax < c.BackoffInitial ||
		c.HealthProbeInterval <= 0 || c.HealthProbeWaitMax <= 0 || c.HealthProbeWaitMax > c.HealthProbeInterval ||
		c.Replica.PinAfterWrite < 0 || c.Replica.MaxLag < 0 ||
		(c.Replica.MaxLag > 0 && c.Replica.MaxLag <= c.HealthProbeInterval) ||
		c.Replica.Wait < 0 {
		t.Fatalf("out-of-range setting accepted: %+v", c)
	}
}

// checkPasswordNotInError parses a URL whose userinfo password is pw. The
// password portion is only well defined when pw holds no '@' or '/' (the
// bytes that end a userinfo), and a message may contain pw by coincidence
// when the rest of the string contains it, or when the same string with
// another password gives a message that contains it; those cases are
// skipped.
func checkPasswordNotInError(t *testing.T, s, pw string) {
	if len(pw) < 8 || strings.ContainsAny(pw, "@/") {
		return
	}
	_, err := ParseConfig("postgres://user:" + pw + "@" + s)
	if err == nil {
		return
	}
	other := strings.Repeat("x", len(pw))
	if other == pw {
		other = strings.Repeat("y", len(pw))
	}
	var otherMsg string
	if _, err := ParseConfig("postgres://user:" + other + "@" + s); err != nil {
		otherMsg = err.Error()
	}
	msg := err.Error()
	for _, secret := range []string{pw, decodeLoosely(pw)} {
		if len(secret) < 8 || strings.Contains(s, secret) || strings.Contains("user", secret) ||
			strings.Contains(otherMsg, secret) {
			continue
		}
		if strings.Contains(msg, secret) {
			t.Fatalf("error %q contains the password %q", msg, secret)
		}
	}
}
