package connstr

import (
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// FuzzScan holds the scanner to pgconn on arbitrary strings: it refuses only
// strings pgconn refuses too, and it reads every value pgconn files under
// RuntimeParams as pgconn does.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		"host=db-a,db-b port=5432,5433 target=replica zones=z1,z2",
		"postgres://app:pw@db-a:5432,db-b:5433/app?target_session_attrs=replica&zone=eu",
		"db-a:5432,[::1]:5433/app?failover_max_attempts=abc",
		"db-a/app?max_lag=500ms&health_probe_interval=1s",
		"db-a/app?zones=a,b,c",
		"db-a/app?patroni_api_urls=http://u:pw@p1:8008,ftp://x&fallback_cooldown=5",
		"db-a/app?pool_max_conns=lots",
		"[::1/app",
		"db-a:notaport/app",
		"host=a target_session_attrs='prefer-replica' application_name=a\\ b",
		"host='a'target_session_attrs='x\\'y'",
		"host= target_session_attrs=replica",
		"db-a/app?target%5Fsession%5Fattrs=standby&pin_after_write=0",
		"db-a/app?sslmode=prefer&target=any&target_session_attrs=any",
		"host=db-a port= password=s3cr3t-pass",
		"host=db-a,db-b zone= password=s3cr3t-pass zones=' a , b '",
		"host=,db-b port=5432,0",
		"[::1]:5432,[fe80::1%25eth0]:5433,[fe80::1%eth0]/app",
		"%2Fvar%2Frun%2Fpostgresql:5433,db-a:99999/app?host=/tmp,/tmp",
		"/app?tcp_user_timeout=2147483648ms&failover_max_duration=2562047h48m&failover_max_attempts=-0",
		"db-a/app?failover_backoff_initial=9223372036854775807ns&pin_after_write=-9223372036855",
		"",
	} {
		f.Add(s)
		f.Add("postgres://user:s3cr3t-pass@" + s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if readsFiles(s) {
			t.Skip("names a file; pgconn would read it")
		}
		scan, scanErr := Scan(s)
		pc, perr := pgconn.ParseConfig(s)
		if scanErr != nil && perr == nil {
			t.Fatalf("scanner refused %q (%v), pgconn accepts it", s, scanErr)
		}
		if scanErr != nil || perr != nil {
			return
		}
		// The scanner must read every value as pgconn does; RuntimeParams
		// shows what pgconn read for the keys it does not know.
		for _, p := range scan.pairs {
			if slices.Contains(pgconnOwnKeys, p.key) {
				continue
			}
			if got, _ := scan.get(p.key); pc.RuntimeParams[p.key] != got {
				t.Fatalf("scanner read %s=%q, pgconn %q", p.key, got, pc.RuntimeParams[p.key])
			}
		}
	})
}

// pgconnOwnKeys are the keys pgconn consumes rather than filing them under
// RuntimeParams ("ssl" is the URL alias for sslmode).
var pgconnOwnKeys = []string{
	"host", "port", "database", "user", "password", "passfile", "connect_timeout", "sslmode", "sslkey",
	"sslcert", "sslcertmode", "sslrootcert", "sslnegotiation", "sslpassword", "sslsni", "krbspn",
	"krbsrvname", "target_session_attrs", "service", "servicefile", "min_protocol_version",
	"max_protocol_version", "channel_binding", "require_auth", "ssl",
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
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b.WriteByte(hi<<4 | lo)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
