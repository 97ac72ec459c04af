package failover

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

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
			cc := c.poolConfig(HostConfig{Host: tc.host, Port: 5433}).ConnConfig
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

// TestTLSConfigSetAfterParse: every host's first connection attempt uses
// the ConnConfig.TLSConfig of the moment, each with its own server name
// unless one was set in code; later variants stay as parsed; a socket
// gets no TLS.
func TestTLSConfigSetAfterParse(t *testing.T) {
	c, err := ParseConfig("postgres://u:pw@db-a:5432,db-b:5433,10.0.0.7:5434/app?sslmode=verify-full")
	if err != nil {
		t.Fatal(err)
	}
	marker := x509.NewCertPool()
	c.ConnConfig.TLSConfig.RootCAs = marker // edited in place
	sourced := HostConfig{Host: "db-c.internal", Port: 5435}
	socket := HostConfig{Host: "/run/postgresql", Port: 5432}
	for _, tc := range []struct {
		h    HostConfig
		want string
	}{
		{c.Hosts[0], "db-a"}, {c.Hosts[1], "db-b"}, {c.Hosts[2], "10.0.0.7"}, {sourced, "db-c.internal"},
	} {
		tc := c.poolConfig(tc.h).ConnConfig.TLSConfig
		if tc == nil || tc.RootCAs != marker {
			t.Fatalf("a host does not get the TLS config set in code")
		}
	}
	for i, want := range []string{"db-a", "db-b", "10.0.0.7"} {
		if got := c.poolConfig(c.Hosts[i]).ConnConfig.TLSConfig.ServerName; got != want {
			t.Errorf("host %d: ServerName %q, want %q", i, got, want)
		}
	}
	if got := c.poolConfig(sourced).ConnConfig.TLSConfig.ServerName; got != "db-c.internal" {
		t.Errorf("sourced host: ServerName %q", got)
	}
	if c.poolConfig(socket).ConnConfig.TLSConfig != nil {
		t.Error("a unix socket gets TLS")
	}

	// Replaced, with a name set in code: that name for every host.
	c.ConnConfig.TLSConfig = &tls.Config{RootCAs: marker, ServerName: "db.example"}
	for _, h := range append(c.Hosts, sourced) {
		if got := c.poolConfig(h).ConnConfig.TLSConfig.ServerName; got != "db.example" {
			t.Errorf("%s: ServerName %q, want the one set in code", h.Addr(), got)
		}
	}
	// Set to nil: no TLS, as pgx would dial.
	c.ConnConfig.TLSConfig = nil
	if c.poolConfig(c.Hosts[1]).ConnConfig.TLSConfig != nil {
		t.Error("TLSConfig set to nil still dials with TLS")
	}

	// sslmode=prefer: the first attempt takes the config set in code, the
	// plain fallback stays.
	p, err := ParseConfig("postgres://u:pw@db-a:5432,db-b:5433/app?sslmode=prefer")
	if err != nil {
		t.Fatal(err)
	}
	p.ConnConfig.TLSConfig = &tls.Config{RootCAs: marker}
	cc := p.poolConfig(p.Hosts[1]).ConnConfig
	if cc.TLSConfig == nil || cc.TLSConfig.RootCAs != marker || cc.TLSConfig.InsecureSkipVerify || cc.TLSConfig.ServerName != "db-b" {
		t.Errorf("prefer: first attempt %+v", cc.TLSConfig)
	}
	if len(cc.Fallbacks) != 1 || cc.Fallbacks[0].TLSConfig != nil {
		t.Errorf("prefer: the plain fallback is gone")
	}
}

// TestHostMovedInCode: a HostConfig whose Host or Port is changed after
// ParseConfig is dialled where it now says, with the string's TLS
// variants moved to it, not at the address the string named.
func TestHostMovedInCode(t *testing.T) {
	c, err := ParseConfig("postgres://u:pw@db-a:5432,db-b:5433/app?sslmode=prefer")
	if err != nil {
		t.Fatal(err)
	}
	c.Hosts[1].Host = "db-c"
	c.Hosts[0].Port = 6432
	for i, want := range []struct {
		host string
		port uint16
	}{{"db-a", 6432}, {"db-c", 5433}} {
		cc := c.poolConfig(c.Hosts[i]).ConnConfig
		if cc.Host != want.host || cc.Port != want.port {
			t.Errorf("host %d dials %s:%d, want %s:%d", i, cc.Host, cc.Port, want.host, want.port)
		}
		if cc.TLSConfig == nil || len(cc.Fallbacks) != 1 || cc.Fallbacks[0].Host != want.host || cc.Fallbacks[0].Port != want.port {
			t.Errorf("host %d: sslmode=prefer's variants not moved with it: TLS %v, fallbacks %+v", i, cc.TLSConfig != nil, cc.Fallbacks)
		}
	}
	if got := c.poolConfig(c.Hosts[1]).ConnConfig.TLSConfig.ServerName; got != "db-c" {
		t.Errorf("moved host's TLS server name %q, want db-c", got)
	}
}
