package hostpool

import (
	"context"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/internal/telemetry"
	"github.com/pgfailover/pgfailover/replica"
)

// Config is what a Set needs of the Pool it serves. Every field is
// required but the hooks, which may be nil.
type Config struct {
	Target    hosthealth.Target // the roles the Pool's own calls go to
	State     *hoststate.Owner[Host]
	Clock     clock.Clock
	Telemetry *telemetry.Instruments
	Log       telemetry.Logger
	// Life ends when the Pool closes: it ends the probes, the background
	// connects and the openings ahead of a promotion.
	Life context.Context
	// Go runs f on a goroutine the Pool's Close waits for. GoUnlessClosed
	// does the same but runs nothing, and reports false, once the Pool is
	// closing; Go is for callers that hold the Pool's host-set lock, which
	// Close takes before it waits.
	Go             func(f func())
	GoUnlessClosed func(f func()) bool

	ProbeConnectTimeout time.Duration // bounds a probe's connect (connect_timeout, or ParseConfig's bound)
	ProbeTimeout        time.Duration // bounds a probe's question (health_probe_timeout)
	Schedule            probe.Schedule
	ReadyConns          int // failover_ready_conns

	// Demoted is told of a host found in a role the target does not
	// accept, after its calls pool was reset.
	Demoted func(addr string)
	// Failed is told of a host a probe found failing (the local-first
	// fallback listens).
	Failed func(addr string, err error)
	// Refresh asks the topology source to look again.
	Refresh func()
	// PrimarySample is told of each primary's WAL position a probe read
	// (the Reader's pins).
	PrimarySample func(addr string, s replica.Sample)
}

// Set is the Pool's hosts at work: each host's pgxpools and the checks
// on their connections, its probe loop, the calls waiting for a usable
// host, and the connections readied on a standby for them. Every
// observation of a host goes to host state through Observe, and every
// new host table through SetTable.
type Set struct {
	cfg   Config
	state *hoststate.Owner[Host]
	waits waits
}

// New returns a Set serving cfg.
func New(cfg Config) *Set {
	if cfg.Failed == nil {
		cfg.Failed = func(string, error) {}
	}
	if cfg.Demoted == nil {
		cfg.Demoted = func(string) {}
	}
	if cfg.Refresh == nil {
		cfg.Refresh = func() {}
	}
	if cfg.PrimarySample == nil {
		cfg.PrimarySample = func(string, replica.Sample) {}
	}
	s := &Set{cfg: cfg, state: cfg.State}
	s.waits.init()
	return s
}

// Observe hands one observation of host h to host state and acts on
// what it changed: it logs and records the news, and closes the pooled
// connections of a host whose server now stands in a role the target
// does not accept, so that no caller keeps writing to a demoted primary
// (only on the change, which keeps pool_min_conns from reconnecting to a
// replica over and over). Every observation of a host goes through here.
func (s *Set) Observe(h *Host, ob hoststate.Observation) hoststate.Result[Host] {
	ob.Addr = h.Addr
	res := s.state.Observe(ob)
	s.Report(res.News)
	if res.Demoted {
		s.cfg.Telemetry.Closed(h.Server, telemetry.ClosedDemoted, int(h.Calls.Stat().TotalConns()))
		h.Calls.Reset()
		s.cfg.Demoted(h.Addr)
	}
	return res
}

// SetTable publishes a new host table and host set (hoststate.Owner's
// SetTable), and reports what it changed.
func (s *Set) SetTable(table *hoststate.Table[Host], hosts []hosthealth.Host) {
	s.Report(s.state.SetTable(table, hosts))
}

// Report logs and records what a publication of the routes changed.
// Observe and SetTable report their own.
func (s *Set) Report(n hoststate.News[Host]) {
	for _, ch := range n.Changes {
		s.cfg.Log.HostChange(ch)
	}
	if o := n.Ended; o != nil && o.Host != nil {
		d := n.At.Sub(o.Since)
		s.cfg.Telemetry.FailoverEnded(o.Host.Server, d)
		s.cfg.Log.FailoverEnded(o.Host.Addr, s.firstRanked(), d)
	}
}

// firstRanked is the address of the best host for the target now, ""
// when none is usable.
func (s *Set) firstRanked() string {
	if rs := s.state.Routes(); len(rs.Ranked[s.cfg.Target]) > 0 {
		return rs.Ranked[s.cfg.Target][0].Addr
	}
	return ""
}

// Retire drains host h, which the published table no longer holds: its
// probe loop ends, then, in the background, its calls in flight finish
// and its pools close; the Pool's Close waits for that.
func (s *Set) Retire(h *Host) {
	if h.stopProbe != nil {
		h.stopProbe()
	}
	s.cfg.Go(func() {
		if h.stopProbe != nil {
			<-h.probeDone
		}
		h.Probe.Close() // its loop closed it, unless it never ran
		s.cfg.Telemetry.Closed(h.Server, telemetry.ClosedRemoved, h.OpenConns())
		h.Close() // waits for the connections in use to come back
	})
}
