package failover

import (
	"slices"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
)

// splitHosts turns pgconn's flat list of connection variants into one
// HostConfig per host of the connection string (hostpool.SplitVariants).
func splitHosts(cc *pgconn.Config) []HostConfig {
	var hosts []HostConfig
	for _, vs := range hostpool.SplitVariants(cc) {
		hosts = append(hosts, HostConfig{Host: vs[0].Host, Port: vs[0].Port, tls: vs})
	}
	return hosts
}

// dedupHosts keeps the first HostConfig of each host:port.
func dedupHosts(hosts []HostConfig) []HostConfig {
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

// poolConfig returns the pgxpool config for host h: a copy of the embedded
// pgxpool.Config that dials h alone, with h's connection variants
// (hostpool.Dialing.For).
func (c *Config) poolConfig(h HostConfig) *pgxpool.Config {
	d := hostpool.Dialing{Base: c.Config, Template: c.templateTLS, ParsedServerName: c.parsedServerName}
	return d.For(h.Host, h.Port, h.tls)
}

// copyHost returns h with its own copies of the TLS variants.
func copyHost(h HostConfig) HostConfig {
	if h.tls != nil {
		variants := make([]*pgconn.FallbackConfig, len(h.tls))
		for i, v := range h.tls {
			variants[i] = hostpool.CopyFallback(v)
		}
		h.tls = variants
	}
	return h
}
