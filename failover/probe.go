package failover

import (
	"context"
	"time"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/outcome"
	"github.com/pgfailover/pgfailover/internal/probe"
)

// probeTimeout bounds a probe's connect (and New's wait for the topology
// source's first report): connect_timeout, or, when connect_timeout is 0
// (no limit for the Pool's connections), the bound ParseConfig set, since
// a probe must never hang.
func (p *Pool) probeTimeout() time.Duration {
	if t := p.cfg.ConnConfig.ConnectTimeout; t > 0 {
		return t
	}
	return p.cfg.probeConnectTimeout
}

// probeAll probes every host and records what it finds, one host at a
// time until the credentials are settled (probe.First). It fails with the
// refusal when a server refused the credentials, and with ErrNoHost,
// listing every host's outcome, when no host is reachable in a role the
// target accepts.
func (p *Pool) probeAll(ctx context.Context) error {
	hosts := p.eng.State.Routes().Table.List
	if len(hosts) == 0 {
		return &FailoverError{Kind: ErrNoHost}
	}
	results := make([]hostpool.ProbeResult, len(hosts))
	ran, refused := probe.First(p.eng.Clock, len(hosts), func(i int) error {
		results[i] = p.eng.Hosts.ProbeOnce(ctx, hosts[i], probe.Plan{})
		return results[i].Err
	}, func(i int) bool { return hosts[i].Socks.Answered() })
	for i := range ran {
		p.eng.Hosts.Probed(hosts[i], results[i])
	}
	if refused >= 0 {
		return &HostError{Addr: hosts[refused].Addr, Err: results[refused].Err}
	}

	fe := &FailoverError{Kind: ErrNoHost}
	var terminal *HostError
	usable := false
	for i, r := range results {
		h := hosts[i]
		switch {
		case r.Err != nil:
			fe.Hosts = append(fe.Hosts, HostError{Addr: h.Addr, Err: r.Err})
			if terminal == nil && outcome.EndsConnect(r.Err, p.cfg.Target) {
				terminal = &HostError{Addr: h.Addr, Err: r.Err}
			}
		case !p.cfg.Target.Accepts(r.Role):
			fe.Hosts = append(fe.Hosts, HostError{Addr: h.Addr, Err: &hosthealth.RoleError{Addr: h.Addr, Role: r.Role, Target: p.cfg.Target}})
		default:
			usable = true
		}
	}
	switch {
	case usable:
		return nil
	case terminal != nil:
		// A bad password or database says more than "no host".
		return terminal
	}
	if err := ctx.Err(); err != nil {
		fe.Cause = err
	}
	return fe
}
