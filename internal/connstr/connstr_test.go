package connstr

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// clearEnv unsets, for one test, every environment variable the scanner
// reads.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{EnvTargetSessionAttrs, envConnectTimeout, envService, envServiceFile, "PGHOST", "PGHOSTADDR"} {
		t.Setenv(k, "")
	}
}

func TestScanPairs(t *testing.T) {
	type kv struct{ key, value string }
	tests := []struct {
		name string
		in   string
		want []kv
	}{
		{"keyword/value", "host=db-a  port=5432\tuser=app", []kv{{"host", "db-a"}, {"port", "5432"}, {"user", "app"}}},
		{"spaces around =", "host = db-a application_name =x", []kv{{"host", "db-a"}, {"application_name", "x"}}},
		{"value starts after the spaces", "a= b=c", []kv{{"a", "b=c"}}},
		{"quoted with escapes", `application_name='a \'b\' c' x=d\ e`, []kv{{"application_name", "a 'b' c"}, {"x", "d e"}}},
		{"empty values", "host='' port=5432 user=", []kv{{"host", ""}, {"port", "5432"}, {"user", ""}}},
		{"dbname is database", "dbname=app", []kv{{"database", "app"}}},
		{"url query", "postgres://u:pw@db-a:5432,db-b/app?sslmode=disable&target%5Fsession%5Fattrs=standby&dbname=x",
			[]kv{{"sslmode", "disable"}, {"target_session_attrs", "standby"}, {"database", "x"}}},
		{"url without query", "postgresql://db-a/app", nil},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Scan(tt.in)
			if err != nil {
				t.Fatalf("Scan(%q): %v", tt.in, err)
			}
			var got []kv
			for _, p := range r.pairs {
				got = append(got, kv{p.key, p.value})
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Scan(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestScanRefuses(t *testing.T) {
	tests := []struct {
		in   string
		want error
	}{
		{"host", errScanSyntax},
		{"=db-a", errScanSyntax},
		{"my host=db-a", errScanSyntax},
		{"host='db-a", errScanSyntax},
		{"host=db\x00", errScanNUL},
		{"postgres://[::1/app", errScanSyntax},
		{"postgres://db-a/app?sslmode", errScanSyntax},
		{"postgres://db-a/app?a=b=c", errScanSyntax},
		{"postgres://db-a/app?a=%zz", errScanSyntax},
		{"postgres://db-a/app?a=%00", errScanSyntax},
		{"postgres://db-a/app?a=b c", errScanSyntax},
		{"postgres://db\x00", errScanNUL},
	}
	for _, tt := range tests {
		if _, err := Scan(tt.in); !errors.Is(err, tt.want) {
			t.Errorf("Scan(%q) error = %v, want %v", tt.in, err, tt.want)
		}
		if _, err := pgconn.ParseConfig(tt.in); err == nil {
			t.Errorf("pgconn accepts %q, which the scanner refuses", tt.in)
		}
	}
}

func TestSecrets(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"host=db-a password=s3cret sslpassword='key pw'", []string{"s3cret", "key pw"}},
		{"postgres://app:p%41ss@db-a/app?password=other", []string{"p%41ss", "pAss", "other"}},
		{"postgres://app:plain@db-a/app", []string{"plain"}},
		{"postgres://app@db-a/app", nil},
		// Found before the error, so that pgx's message can be scrubbed.
		{"password=s3cret host='db-a", []string{"s3cret"}},
		{"postgres://app:s3cret@db-a/app?a", []string{"s3cret"}},
	}
	for _, tt := range tests {
		r, _ := Scan(tt.in)
		if got := r.Secrets(); !slices.Equal(got, tt.want) {
			t.Errorf("Secrets of %q = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestWithoutTargetSessionAttrs(t *testing.T) {
	tests := []struct {
		in      string
		neutral bool
		want    string
	}{
		{"host=db-a port=5432", false, "host=db-a port=5432"},
		{"host=db-a target_session_attrs=replica port=5432", false, "host=db-a  port=5432"},
		{"target_session_attrs = 'prefer-replica' host=db-a", false, " host=db-a"},
		{`host=db-a application_name=a\`, true, `target_session_attrs=any host=db-a application_name=a\`},
		{"host=db-a target_session_attrs=replica", true, "target_session_attrs=any host=db-a "},
		{"postgres://db-a/app", false, "postgres://db-a/app"},
		{"postgres://db-a/app", true, "postgres://db-a/app?target_session_attrs=any"},
		{"postgres://db-a/app?sslmode=disable&target_session_attrs=standby&x=y", false, "postgres://db-a/app?sslmode=disable&x=y"},
		{"postgres://db-a/app?target%5Fsession%5Fattrs=standby", true, "postgres://db-a/app?target_session_attrs=any"},
		{"postgres://db-a/app?sslmode=disable", true, "postgres://db-a/app?target_session_attrs=any&sslmode=disable"},
	}
	for _, tt := range tests {
		r, err := Scan(tt.in)
		if err != nil {
			t.Fatalf("Scan(%q): %v", tt.in, err)
		}
		if got := r.WithoutTargetSessionAttrs(tt.neutral); got != tt.want {
			t.Errorf("WithoutTargetSessionAttrs(%q, %v) = %q, want %q", tt.in, tt.neutral, got, tt.want)
		}
	}
}

func TestTargetSessionAttrs(t *testing.T) {
	tests := []struct {
		name string
		in   string
		svc  map[string]string
		env  string
		want TargetSessionAttrs
	}{
		{"none", "host=db-a", nil, "", TargetSessionAttrs{}},
		{"string", "target_session_attrs=standby", nil, "", TargetSessionAttrs{Value: "standby", Set: true}},
		{"last of repeated keys", "target_session_attrs=standby target_session_attrs=primary", nil, "",
			TargetSessionAttrs{Value: "primary", Set: true}},
		{"string outranks the service and the environment", "target_session_attrs=standby",
			map[string]string{"target_session_attrs": "primary"}, "any",
			TargetSessionAttrs{Value: "standby", Set: true, FromService: true, FromEnv: true}},
		{"service outranks the environment", "host=db-a", map[string]string{"target_session_attrs": "primary"}, "any",
			TargetSessionAttrs{Value: "primary", Set: true, FromService: true, FromEnv: true}},
		{"environment only", "host=db-a", nil, "read-only",
			TargetSessionAttrs{Value: "read-only", FromEnv: true, EnvOnly: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(EnvTargetSessionAttrs, tt.env)
			r, err := Scan(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.TargetSessionAttrs(tt.svc); got != tt.want {
				t.Fatalf("TargetSessionAttrs = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestConnectTimeoutSet(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		svc     map[string]string
		env     string
		timeout bool // pgconn's result has a non-zero ConnectTimeout
		want    bool
	}{
		{"unset", "host=db-a", nil, "", false, false},
		{"zero in the string", "host=db-a connect_timeout=0", nil, "", false, true},
		{"zero in the URL", "postgres://db-a/app?connect_timeout=0", nil, "", false, true},
		{"in the service", "host=db-a", map[string]string{"connect_timeout": "0"}, "", false, true},
		{"in the environment", "host=db-a", nil, "0", false, true},
		{"non-zero in pgconn's result", "host=db-a", nil, "", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(envConnectTimeout, tt.env)
			r, err := Scan(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			var cc pgconn.Config
			if tt.timeout {
				cc.ConnectTimeout = 1
			}
			if got := r.ConnectTimeoutSet(&cc, tt.svc); got != tt.want {
				t.Fatalf("ConnectTimeoutSet = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNamesHost(t *testing.T) {
	tests := []struct {
		name string
		in   string
		svc  map[string]string
		env  string // PGHOST
		want bool
	}{
		{"keyword host", "host=db-a", nil, "", true},
		{"keyword hostaddr", "hostaddr=10.0.0.1", nil, "", true},
		{"none", "dbname=app", nil, "", false},
		{"url host", "postgres://db-a/app", nil, "", true},
		{"url without host", "postgres:///app", nil, "", false},
		{"url query host", "postgres:///app?host=/tmp", nil, "", true},
		{"service", "dbname=app", map[string]string{"host": "db-a"}, "", true},
		{"PGHOST", "dbname=app", nil, "db-a", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			t.Setenv("PGHOST", tt.env)
			r, err := Scan(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.NamesHost(tt.svc); got != tt.want {
				t.Fatalf("NamesHost = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestServiceSettings(t *testing.T) {
	clearEnv(t)
	file := filepath.Join(t.TempDir(), "pg_service.conf")
	if err := os.WriteFile(file, []byte("[app]\nhost=db-a\ntarget_session_attrs=standby\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   string
		env  string // PGSERVICE
		want map[string]string
	}{
		{"named in the string", "service=app servicefile=" + file, "", map[string]string{"host": "db-a", "target_session_attrs": "standby"}},
		{"named by PGSERVICE", "servicefile=" + file, "app", map[string]string{"host": "db-a", "target_session_attrs": "standby"}},
		{"no service", "servicefile=" + file, "", nil},
		{"unknown service", "service=other servicefile=" + file, "", nil},
		{"unreadable file", "service=app servicefile=" + file + ".missing", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envService, tt.env)
			r, err := Scan(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got := r.ServiceSettings()
			if len(got) != len(tt.want) {
				t.Fatalf("ServiceSettings = %q, want %q", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Fatalf("ServiceSettings = %q, want %q", got, tt.want)
				}
			}
		})
	}
}
