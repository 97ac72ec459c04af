package failover

import (
	"errors"
	"log/slog"
	"math/rand/v2"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/topology"
)

// hostTable is the set of hosts the Pool uses, by address and in order.
type hostTable = hoststate.Table[hostpool.Host]

// newHostSet builds the Pool's hosts at work (hostpool.Set) over its
// host state, its clock, its telemetry and its life.
func (p *Pool) newHostSet() *hostpool.Set {
	return hostpool.New(hostpool.Config{
		Target:              p.cfg.Target,
		State:               p.eng.State,
		Clock:               p.eng.Clock,
		Telemetry:           p.eng.Telemetry,
		Log:                 p.eng.Log,
		Life:                p.eng.Life,
		Go:                  p.bg.Go,
		GoUnlessClosed:      p.goUnlessClosed,
		ProbeConnectTimeout: p.probeTimeout(),
		HealthProbeTimeout:  p.cfg.HealthProbeTimeout,
		Schedule:            probe.Schedule{Idle: p.cfg.HealthProbeInterval, WaitMax: p.cfg.HealthProbeWaitMax, Recheck: p.cfg.NameRecheckInterval, Rand: rand.Int64N},
		ReadyConns:          p.cfg.ReadyConns,
		Demoted:             func(addr string) { p.follower().Demoted(addr) },
		Failed:              func(addr string, err error) { p.eng.Steer.Failed(addr, err) },
		Refresh:             p.refreshTopology,
	})
}

// setHosts makes the host set the connection string's hosts merged with
// the topology source's last report. A host that stays keeps its pools and
// its state; a new host gets its pools (and a probe loop, once the Pool
// probes) and starts Unknown with the role the source claims; a host that
// left is drained: calls in flight on it finish, then its pools close, in
// the background, and Close waits for it. It returns why hosts could not be
// added, if any could not; the others are added all the same.
func (p *Pool) setHosts(sourced []topology.Member) error {
	p.topoMu.Lock()
	defer p.topoMu.Unlock()
	if p.eng.Closed() {
		return ErrClosed
	}
	if sourced != nil {
		p.sourced = sourced
	}
	wanted, configs := p.wantedHosts()
	before := p.eng.State.Routes()
	old := before.Table
	next := &hostTable{ByAddr: make(map[string]*hostpool.Host, len(wanted))}
	var errs []error
	for i, w := range wanted {
		h := old.ByAddr[w.Addr]
		if h == nil {
			var err error
			if h, err = p.eng.Hosts.NewHost(configs[i].Host, configs[i].Port, p.cfg.poolConfig(configs[i])); err != nil {
				err = &HostError{Addr: w.Addr, Err: err}
				p.logHostError(w.Addr, err)
				errs = append(errs, err)
				continue
			}
			if p.probing {
				p.eng.Hosts.StartProbe(h)
			}
		}
		next.ByAddr[w.Addr] = h
		next.List = append(next.List, h)
	}
	next.NoReads, next.ReadLast = map[string]bool{}, map[string]bool{}
	for _, m := range p.sourced {
		next.NoReads[m.Addr()] = m.NoLoadBalance
		next.ReadLast[m.Addr()] = m.ReadLast
	}
	// The new table and the new host set are published together; only
	// then the removed hosts go.
	p.eng.Hosts.SetTable(next, wanted)
	for _, h := range old.List {
		if next.ByAddr[h.Addr] == nil {
			p.eng.Hosts.Retire(h)
		}
	}
	// A member newly named the primary is probed at once: a promotion may
	// be under way there.
	for _, w := range wanted {
		if w.Claimed != hosthealth.RolePrimary {
			continue
		}
		if st, ok := before.Status(w.Addr); (!ok || st.Claimed != hosthealth.RolePrimary) && next.ByAddr[w.Addr] != nil {
			p.eng.Hosts.HintPrimary(next.ByAddr[w.Addr])
		}
	}
	return errors.Join(errs...)
}

// wantedHosts lists the hosts the Pool should have now, with the
// configuration each is dialled with. A member the connection string also
// names keeps the string's TLS settings; one only the source names is
// dialled with the template's, its own name as the TLS server name.
func (p *Pool) wantedHosts() ([]hosthealth.HostSpec, []HostConfig) {
	var wanted []hosthealth.HostSpec
	var configs []HostConfig
	seen := make(map[string]int)
	for _, h := range p.cfg.Hosts {
		seen[h.Addr()] = len(wanted)
		wanted = append(wanted, hosthealth.HostSpec{Addr: h.Addr(), Zone: h.Zone})
		configs = append(configs, h)
	}
	for _, m := range p.sourced {
		if i, ok := seen[m.Addr()]; ok {
			wanted[i].Claimed = m.Role
			if wanted[i].Zone == "" {
				wanted[i].Zone = m.Zone
			}
			continue
		}
		seen[m.Addr()] = len(wanted)
		wanted = append(wanted, hosthealth.HostSpec{Addr: m.Addr(), Zone: m.Zone, Claimed: m.Role})
		configs = append(configs, HostConfig{Host: m.Host, Port: m.Port, Zone: m.Zone})
	}
	return wanted, configs
}

// startProbing starts every host's probe loop, and makes hosts added from
// now on start theirs at once. Until then only NewWithConfig probes.
func (p *Pool) startProbing() {
	p.topoMu.Lock()
	defer p.topoMu.Unlock()
	p.probing = true
	for _, h := range p.eng.State.Routes().Table.List {
		p.eng.Hosts.StartProbe(h)
	}
}

// watch follows the topology source until the Pool closes. reported is
// called after each update has been applied.
func (p *Pool) watch(src topology.Source, reported func()) {
	err := src.Watch(p.eng.Life, func(t topology.Topology) {
		members := t.Members
		if members == nil {
			members = []topology.Member{}
		}
		p.setHosts(members) // hosts that cannot be added are logged
		p.eng.Steer.Members(members)
		reported()
	})
	if err != nil && p.eng.Life.Err() == nil {
		p.eng.Log.Warn("topology", "pgfailover: the topology source stopped", slog.String("error", err.Error()))
	}
}

// logHostError logs a host that could not be added.
func (p *Pool) logHostError(addr string, err error) {
	p.eng.Log.WarnHost(addr, "pgfailover: host not added", slog.String("error", err.Error()))
}
