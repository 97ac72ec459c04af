package failover

import "testing"

// TestSourcedHostVariants: a host only a topology source names is dialled
// with the connection variants of the string's first host: both of
// sslmode=prefer's, its own name for verify-full, no TLS on a socket.
func TestSourcedHostVariants(t *testing.T) {
	for _, tc := range []struct {
		name, dsn, host string
		wantTLS         []bool // per variant, in order
		wantServerName  string
	}{
		{"prefer", "postgres://u:pw@db-a:5432/app?sslmode=prefer", "db-b", []bool{true, false}, "db-b"},
		{"allow", "postgres://u:pw@db-a:5432/app?sslmode=allow", "db-b", []bool{false, true}, "db-b"},
		{"disable", "postgres://u:pw@db-a:5432/app?sslmode=disable", "db-b", []bool{false}, ""},
		{"verify-full", "postgres://u:pw@db-a:5432/app?sslmode=verify-full", "db-b.internal", []bool{true}, "db-b.internal"},
		{"verify-full, an IP", "postgres://u:pw@db-a:5432/app?sslmode=verify-full", "10.0.0.7", []bool{true}, "10.0.0.7"},
		{"unix socket", "postgres://u:pw@db-a:5432/app?sslmode=prefer", "/var/run/postgresql", []bool{false}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig(tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			cc := c.hostConfig(Host{Host: tc.host, Port: 5433}).ConnConfig
			got := []bool{cc.TLSConfig != nil}
			if cc.Host != tc.host || cc.Port != 5433 {
				t.Fatalf("dials %s:%d, want %s:5433", cc.Host, cc.Port, tc.host)
			}
			for _, f := range cc.Fallbacks {
				if f.Host != tc.host || f.Port != 5433 {
					t.Fatalf("a variant dials %s:%d, want %s:5433", f.Host, f.Port, tc.host)
				}
				got = append(got, f.TLSConfig != nil)
			}
			if len(got) != len(tc.wantTLS) {
				t.Fatalf("variants with TLS: %v, want %v", got, tc.wantTLS)
			}
			for i := range got {
				if got[i] != tc.wantTLS[i] {
					t.Fatalf("variants with TLS: %v, want %v", got, tc.wantTLS)
				}
			}
			if cc.TLSConfig != nil && cc.TLSConfig.ServerName != tc.wantServerName {
				t.Errorf("ServerName %q, want %q", cc.TLSConfig.ServerName, tc.wantServerName)
			}
		})
	}
}
