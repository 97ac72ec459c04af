package failover

import (
	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/probe"
)

// Helpers for tests that build a Pool in memory, without servers: its host
// state holds bare hostpool.Hosts, and observations go straight to the
// owner (a bare Host has no pgxpool for Set.Observe to reset).

// newMemState gives p an owner of host state for its target, on its
// clock, and a host set over it that reports with p's telemetry and log.
func newMemState(p *Pool) {
	p.state = hoststate.New[hostpool.Host](hoststate.Options{Target: p.cfg.Target, Zone: p.cfg.Zone, Now: p.clock.Now})
	p.hosts = hostpool.New(hostpool.Config{Target: p.cfg.Target, State: p.state, Clock: p.clock, Telemetry: p.telemetry, Log: p.log})
}

// setMemHosts makes hosts p's host set, each with a bare Host made by mk
// (nil: only its address).
func setMemHosts(p *Pool, hosts []hosthealth.Host, mk func(i int, addr string) *hostpool.Host) *hostTable {
	table := &hostTable{ByAddr: map[string]*hostpool.Host{}}
	for i, h := range hosts {
		hp := &hostpool.Host{Addr: h.Addr}
		if mk != nil {
			hp = mk(i, h.Addr)
		}
		table.ByAddr[h.Addr] = hp
		table.List = append(table.List, hp)
	}
	p.hosts.SetTable(table, hosts)
	return table
}

// memObserve hands ob to p's host state and reports its news.
func memObserve(p *Pool, addr string, ob hoststate.Observation) hoststate.Result[hostpool.Host] {
	ob.Addr = addr
	res := p.state.Observe(ob)
	p.hosts.Report(res.News)
	return res
}

// memAnswer records that the server at addr answered in role.
func memAnswer(p *Pool, addr string, role hosthealth.Role) {
	memObserve(p, addr, hoststate.Observation{Kind: hoststate.Answered, Role: role, Since: p.state.Epoch(addr)})
}

// memFail records a failover event of class on the host at addr.
func memFail(p *Pool, addr string, class hosthealth.Class) {
	memObserve(p, addr, hoststate.Observation{Kind: hoststate.Failed, Class: class})
}

// memProbe records a probe of the host at addr that found r.
func memProbe(p *Pool, addr string, r probe.Result) {
	memObserve(p, addr, hoststate.Observation{Kind: hoststate.Probed, Probe: r, Since: p.state.Epoch(addr)})
}
