package hostpool

import (
	"crypto/tls"
	"net"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Dialing is how the Pool's configuration says each host is dialled.
type Dialing struct {
	// Base is the Pool's pgxpool configuration; its ConnConfig's
	// TLSConfig, as it is when a host's pools are built, applies to
	// every host's first connection variant (see tlsFor).
	Base *pgxpool.Config
	// Template holds the connection variants pgconn derived for the
	// connection string's first host (sslmode's TLS and plain attempts),
	// which a host named only by a topology source is dialled with.
	Template []*pgconn.FallbackConfig
	// ParsedServerName is the TLS server name parsing derived for the
	// string's first host: a TLSConfig still holding it gets each host's
	// own name; any other name was set in code.
	ParsedServerName string
}

// For returns the pgxpool config of the host at host:port, whose
// connection variants are variants: a copy of Base whose ConnConfig Host
// and Port are the host's, whose TLSConfig is Base's (see tlsFor) and
// whose Fallbacks are the host's other variants, so a pool never dials a
// host other than its own.
//
// A host without variants of its own (one a topology source named, one
// added to Config.Hosts by hand, or one whose Host or Port was changed in
// code after its variants were derived) gets the Template's (see
// variantsFor).
func (d Dialing) For(host string, port uint16, variants []*pgconn.FallbackConfig) *pgxpool.Config {
	pc := d.Base.Copy()
	cc := pc.ConnConfig
	cc.ValidateConnect = nil
	cc.Fallbacks = nil

	if len(variants) == 0 || variants[0].Host != host || variants[0].Port != port {
		variants = d.variantsFor(host, port)
	}
	first := variants[0]
	cc.Host, cc.Port = first.Host, first.Port
	cc.TLSConfig = d.tlsFor(first)
	for _, v := range variants[1:] {
		cc.Fallbacks = append(cc.Fallbacks, CopyFallback(v))
	}
	return pc
}

// tlsFor returns the TLS config of a host's first connection variant v:
// Base's, as it is when the pool is built, so that a TLSConfig replaced
// or edited after ParseConfig applies to every host the way pgx applies
// it to its first one. Only the server name is the host's own: where the
// config holds none, or still ParsedServerName, it becomes v's (the name
// verify-full checks the certificate against). Any other name set in code
// is kept. A unix socket is dialled without TLS, as pgconn does.
//
// The later variants (the plain attempt of sslmode=prefer, the TLS one of
// allow) stay as ParseConfig derived them for the host, as pgx's fallbacks
// do.
func (d Dialing) tlsFor(v *pgconn.FallbackConfig) *tls.Config {
	if network, _ := pgconn.NetworkAddress(v.Host, v.Port); network == "unix" {
		return nil
	}
	t := d.Base.ConnConfig.TLSConfig.Clone()
	if t == nil {
		return nil
	}
	if t.ServerName == "" || t.ServerName == d.ParsedServerName {
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
// string does not name: the Template's (as pgconn derived them from
// sslmode: TLS then plain for prefer, plain then TLS for allow), moved to
// host:port, with the host's own name as the TLS server name so that
// sslmode=verify-full checks the certificate against it. A unix socket
// gets the plain variant only.
func (d Dialing) variantsFor(host string, port uint16) []*pgconn.FallbackConfig {
	unix := false
	if network, _ := pgconn.NetworkAddress(host, port); network == "unix" {
		unix = true
	}
	var out []*pgconn.FallbackConfig
	for _, v := range d.Template {
		if unix && v.TLSConfig != nil {
			continue
		}
		w := CopyFallback(v)
		w.Host, w.Port = host, port
		if w.TLSConfig != nil {
			w.TLSConfig.ServerName = serverName(host)
			if !w.TLSConfig.InsecureSkipVerify {
				// verify-full: the certificate is checked against the
				// host, an IP address included, as pgconn does.
				w.TLSConfig.ServerName = host
			}
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		out = append(out, &pgconn.FallbackConfig{Host: host, Port: port})
	}
	return out
}

// SplitVariants turns pgconn's flat list of connection variants (the
// main config, then Fallbacks) into one list per host of the connection
// string. pgconn lists the variants of one host next to each other, at
// most one with TLS and one without, so a variant starts a new host when
// its host:port differs from the previous one or when the current host
// already has a variant of the same kind. The second rule keeps
// "host=a,a" as two hosts.
func SplitVariants(cc *pgconn.Config) [][]*pgconn.FallbackConfig {
	variants := make([]*pgconn.FallbackConfig, 0, 1+len(cc.Fallbacks))
	variants = append(variants, &pgconn.FallbackConfig{Host: cc.Host, Port: cc.Port, TLSConfig: cc.TLSConfig})
	variants = append(variants, cc.Fallbacks...)

	var hosts [][]*pgconn.FallbackConfig
	for _, v := range variants {
		if n := len(hosts); n > 0 {
			last := hosts[n-1]
			sameKind := slices.ContainsFunc(last, func(w *pgconn.FallbackConfig) bool {
				return (w.TLSConfig == nil) == (v.TLSConfig == nil)
			})
			if last[0].Host == v.Host && last[0].Port == v.Port && !sameKind {
				hosts[n-1] = append(last, v)
				continue
			}
		}
		hosts = append(hosts, []*pgconn.FallbackConfig{v})
	}
	return hosts
}

// serverName is what pgconn would put in tls.Config.ServerName for host:
// the name itself, or "" for an IP address.
func serverName(host string) string {
	if net.ParseIP(host) != nil {
		return ""
	}
	return host
}

// CopyFallback returns a copy of v with its own TLS config, nil for nil.
func CopyFallback(v *pgconn.FallbackConfig) *pgconn.FallbackConfig {
	if v == nil {
		return nil
	}
	c := *v
	c.TLSConfig = c.TLSConfig.Clone()
	return &c
}
