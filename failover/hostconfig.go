package failover

import (
	"crypto/tls"
	"net"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

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

// hostConfig returns the pgxpool config for host h: a copy of the embedded
// pgxpool.Config whose ConnConfig Host and Port are h's, whose TLSConfig is
// the one set on the embedded ConnConfig (see tlsFor) and whose Fallbacks
// are h's other connection variants, so a pool never dials a host other
// than its own.
//
// A Host without variants (one a topology source named, or one added to
// Hosts by hand) gets those of the string's first host (see variantsFor).
func (c *Config) hostConfig(h Host) *pgxpool.Config {
	pc := c.Config.Copy()
	cc := pc.ConnConfig
	cc.ValidateConnect = nil
	cc.Fallbacks = nil

	variants := h.tls
	if len(variants) == 0 {
		variants = c.variantsFor(h)
	}
	first := variants[0]
	cc.Host, cc.Port = first.Host, first.Port
	cc.TLSConfig = c.tlsFor(first)
	for _, v := range variants[1:] {
		cc.Fallbacks = append(cc.Fallbacks, copyFallback(v))
	}
	return pc
}

// tlsFor returns the TLS config of a host's first connection variant v:
// the one on the embedded ConnConfig, as it is when the pool is built, so
// that a TLSConfig replaced or edited after ParseConfig applies to every
// host the way pgx applies it to its first one. Only the server name is
// the host's own: where the config holds none, or still the name
// ParseConfig derived for the string's first host, it becomes v's (the
// name verify-full checks the certificate against). Any other name set in
// code is kept. A unix socket is dialled without TLS, as pgconn does.
//
// The later variants (the plain attempt of sslmode=prefer, the TLS one of
// allow) stay as ParseConfig derived them for the host, as pgx's fallbacks
// do.
func (c *Config) tlsFor(v *pgconn.FallbackConfig) *tls.Config {
	if network, _ := pgconn.NetworkAddress(v.Host, v.Port); network == "unix" {
		return nil
	}
	t := cloneTLS(c.ConnConfig.TLSConfig)
	if t == nil {
		return nil
	}
	if t.ServerName == "" || t.ServerName == c.parsedServerName {
		name := serverName(v.Host)
		if v.TLSConfig != nil {
			name = v.TLSConfig.ServerName
		}
		if name == "" && !t.InsecureSkipVerify {
			// A config that verifies needs a name; an IP address is
			// checked against the certificate's addresses.
			name = v.Host
		}
		t.ServerName = name
	}
	return t
}

// variantsFor returns the connection variants of a host the connection
// string does not name: those of the string's first host (as pgconn
// derived them from sslmode: TLS then plain for prefer, plain then TLS for
// allow), moved to h, with h's own name as the TLS server name so that
// sslmode=verify-full checks the certificate against it. A unix socket
// gets the plain variant only.
func (c *Config) variantsFor(h Host) []*pgconn.FallbackConfig {
	unix := false
	if network, _ := pgconn.NetworkAddress(h.Host, h.Port); network == "unix" {
		unix = true
	}
	var out []*pgconn.FallbackConfig
	for _, v := range c.templateTLS {
		if unix && v.TLSConfig != nil {
			continue
		}
		w := copyFallback(v)
		w.Host, w.Port = h.Host, h.Port
		if w.TLSConfig != nil {
			w.TLSConfig.ServerName = serverName(h.Host)
			if !w.TLSConfig.InsecureSkipVerify {
				// verify-full: the certificate is checked against the
				// host, an IP address included, as pgconn does.
				w.TLSConfig.ServerName = h.Host
			}
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		out = append(out, &pgconn.FallbackConfig{Host: h.Host, Port: h.Port})
	}
	return out
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
