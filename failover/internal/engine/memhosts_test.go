package engine

import (
	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/probe"
)

// Helpers for tests that build an Engine in memory, without servers: its host
// state holds bare hostpool.Hosts, and observations go straight to the
// owner (a bare Host has no pgxpool for Set.Observe to reset).

// newMemState gives e an owner of host state for its target, on its
// clock, and a host set over it that reports with e's telemetry and log.
func newMemState(e *Engine) {
	e.State = hoststate.New[hostpool.Host](hoststate.Options{Target: e.Target, Clock: e.Clock})
	e.Hosts = hostpool.New(hostpool.Config{Target: e.Target, State: e.State, Clock: e.Clock, Telemetry: e.Telemetry, Log: e.Log})
}

// setMemHosts makes hosts e's host set, each with a bare Host made by mk
// (nil: only its address).
func setMemHosts(e *Engine, hosts []hosthealth.HostSpec, mk func(i int, addr string) *hostpool.Host) *hoststate.Table[hostpool.Host] {
	table := &hoststate.Table[hostpool.Host]{ByAddr: map[string]*hostpool.Host{}}
	for i, h := range hosts {
		hp := &hostpool.Host{Addr: h.Addr}
		if mk != nil {
			hp = mk(i, h.Addr)
		}
		table.ByAddr[h.Addr] = hp
		table.List = append(table.List, hp)
	}
	e.Hosts.SetTable(table, hosts)
	return table
}

// memObserve hands ob to e's host state and reports its news.
func memObserve(e *Engine, addr string, ob hoststate.Observation) hoststate.Result[hostpool.Host] {
	ob.Addr = addr
	res := e.State.Observe(ob)
	e.Hosts.Report(res.News)
	return res
}

// memAnswer records that the server at addr answered in role.
func memAnswer(e *Engine, addr string, role hosthealth.Role) {
	memObserve(e, addr, hoststate.Observation{Kind: hoststate.Answered, Role: role, Since: e.State.Epoch(addr)})
}

// memFail records a failover event of class on the host at addr.
func memFail(e *Engine, addr string, class hosthealth.Class) {
	memObserve(e, addr, hoststate.Observation{Kind: hoststate.Failed, Class: class})
}

// memProbe records a probe of the host at addr that found r.
func memProbe(e *Engine, addr string, r probe.Result) {
	memObserve(e, addr, hoststate.Observation{Kind: hoststate.Probed, Probe: r, Since: e.State.Epoch(addr)})
}
