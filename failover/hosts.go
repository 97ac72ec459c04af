package failover

import (
	"errors"
	"log/slog"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/telemetry"
	"github.com/pgfailover/pgfailover/topology"
)

// setHosts makes the host set the connection string's hosts merged with
// the topology source's last report. A host that stays keeps its pool and
// its state; a new host gets a pool (and a probe loop, once the Pool
// probes) and starts Unknown with the role the source claims; a host that
// left is drained: calls in flight on it finish, then its pool closes, in
// the background, and Close waits for it. It returns why hosts could not be
// added, if any could not; the others are added all the same.
func (p *Pool) setHosts(sourced []topology.Member) error {
	p.topoMu.Lock()
	defer p.topoMu.Unlock()
	if p.closed.Load() {
		return ErrClosed
	}
	if sourced != nil {
		p.sourced = sourced
	}
	wanted, configs := p.wantedHosts()
	before := p.state.Routes()
	old := before.Table
	next := &hostTable{ByAddr: make(map[string]*hostPool, len(wanted))}
	var errs []error
	for i, w := range wanted {
		h := old.ByAddr[w.Addr]
		if h == nil {
			var err error
			if h, err = p.newHostPool(configs[i]); err != nil {
				p.logHostError(w.Addr, err)
				errs = append(errs, err)
				continue
			}
			if p.probing {
				p.startProbe(h)
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
	p.report(p.state.SetTable(next, wanted))
	for _, h := range old.List {
		if next.ByAddr[h.addr] == nil {
			p.retire(h)
		}
	}
	// A member newly named the primary is probed at once: a promotion may
	// be under way there.
	for _, w := range wanted {
		if w.Claimed != hosthealth.RolePrimary {
			continue
		}
		if st, ok := before.Status(w.Addr); !ok || st.Claimed != hosthealth.RolePrimary {
			p.hintPrimary(w.Addr)
		}
	}
	return errors.Join(errs...)
}

// wantedHosts lists the hosts the Pool should have now, with the
// configuration each is dialled with. A member the connection string also
// names keeps the string's TLS settings; one only the source names is
// dialled with the template's, its own name as the TLS server name.
func (p *Pool) wantedHosts() ([]hosthealth.Host, []Host) {
	var wanted []hosthealth.Host
	var configs []Host
	seen := make(map[string]int)
	for _, h := range p.cfg.Hosts {
		seen[h.Addr()] = len(wanted)
		wanted = append(wanted, hosthealth.Host{Addr: h.Addr(), Zone: h.Zone})
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
		wanted = append(wanted, hosthealth.Host{Addr: m.Addr(), Zone: m.Zone, Claimed: m.Role})
		configs = append(configs, Host{Host: m.Host, Port: m.Port, Zone: m.Zone})
	}
	return wanted, configs
}

// retire drains a host that left the topology. Called with topoMu held.
func (p *Pool) retire(h *hostPool) {
	delete(p.hints, h.addr)
	if h.stopProbe != nil {
		h.stopProbe()
	}
	p.bg.Go(func() {
		if h.stopProbe != nil {
			<-h.probeDone
		}
		h.probe.Close() // its loop closed it, unless it never ran
		p.telemetry.Closed(h.server, telemetry.ClosedRemoved, h.openConns())
		h.close() // waits for the connections in use to come back
	})
}

// startProbing starts every host's probe loop, and makes hosts added from
// now on start theirs at once. Until then only NewWithConfig probes.
func (p *Pool) startProbing() {
	p.topoMu.Lock()
	defer p.topoMu.Unlock()
	p.probing = true
	for _, h := range p.state.Routes().Table.List {
		p.startProbe(h)
	}
}

// watch follows the topology source until the Pool closes. reported is
// called after each update has been applied.
func (p *Pool) watch(src topology.Source, reported func()) {
	err := src.Watch(p.life, func(t topology.Topology) {
		members := t.Members
		if members == nil {
			members = []topology.Member{}
		}
		p.setHosts(members) // hosts that cannot be added are logged
		p.steer.members(members)
		reported()
	})
	if err != nil && p.life.Err() == nil {
		p.log.Warn("topology", "pgfailover: the topology source stopped", slog.String("error", err.Error()))
	}
}

// logHostError logs a host that could not be added.
func (p *Pool) logHostError(addr string, err error) {
	p.log.WarnHost(addr, "pgfailover: host not added", slog.String("error", err.Error()))
}

// noteWrite records that a call that may have written succeeded. The
// clock is read once. The time is kept exactly, never moving back, so
// that a sample of the primary taken after it is known to be (see
// Reader.pin); a writer that finds a later time already there writes
// nothing.
func (p *Pool) noteWrite() {
	now := p.clock.Now().UnixNano()
	for {
		old := p.lastWrite.Load()
		if now <= old || p.lastWrite.CompareAndSwap(old, now) {
			return
		}
	}
}
