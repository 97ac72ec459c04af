package hostpool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/internal/telemetry"
)

// Config is what a Set needs of the Pool it serves. Every field is
// required but the three hooks after ReadyConns (Demoted, Failed,
// Refresh), which may be nil.
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
	HealthProbeTimeout  time.Duration // bounds a probe's question (health_probe_timeout)
	Schedule            probe.Schedule
	ReadyConns          int // failover_ready_conns

	// Demoted is told of a host found in a role the target does not
	// accept, after its calls pool was reset.
	Demoted func(addr string)
	// Failed is told of a host a probe, a call or a connect found failing
	// (the local-first fallback listens).
	Failed func(addr string, err error)
	// Refresh asks the topology source to look again.
	Refresh func()
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
	// readsUsed says that the Reader has opened a connection: from then
	// on every host is in use (inUse), since its reads may go to any
	// replica.
	readsUsed atomic.Bool
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
	s := &Set{cfg: cfg, state: cfg.State}
	s.waits.init()
	return s
}

// Observe hands one observation of host h to host state and acts on
// what it changed: it logs and records the news, and resets the calls
// pool of a host whose server now stands in a role the target does not
// accept, so that no caller keeps writing to a demoted primary
// (only on the change, which keeps pool_min_conns from reconnecting to a
// replica over and over). Every observation of a host goes through here,
// but the answer to a pinned read's request for a sample of the primary,
// which the engine hands to hoststate.Owner.AnswerSample.
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

// MarkFailed records a failover event of class on host h, met by a call,
// a transaction, a dial or a connect that began in h's epoch since (Epoch):
// host state marks the host, unless it recorded a failure since (the same
// event, met by another call, is news once), (a write refused
// by a read-only server makes it a replica for the ranking, and resets
// its calls pool), the local-first fallback hears of it (Failed;
// not of a refusal as a replica), and the topology source is asked to
// look again. A wrong role stated by the server when connecting was
// recorded then, and is not recorded again. A server refusing a new
// connection while the host's connections work on is full, not down
// (full), and is not marked.
func (s *Set) MarkFailed(h *Host, since hoststate.Epoch, class hosthealth.Class, err error) {
	if _, ok := errors.AsType[*hosthealth.RoleError](err); ok && class == hosthealth.Topology || s.full(h, err) {
		return
	}
	if s.Observe(h, hoststate.Observation{Kind: hoststate.Failed, Class: class, Since: since}).Dropped {
		return
	}
	if class != hosthealth.Topology {
		s.cfg.Failed(h.Addr, err)
	}
	s.cfg.Refresh()
}

// SetTable publishes a new host table and host set (hoststate.Owner's
// SetTable), and reports what it changed.
func (s *Set) SetTable(table *hoststate.Table[Host], hosts []hosthealth.HostSpec) {
	s.Report(s.state.SetTable(table, hosts))
}

// Report logs and records what a publication of the routes changed.
// Observe and SetTable report their own; it is exported for tests that
// build host state in memory, without pools for Observe to reset.
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

// Hosts is the published host table's hosts, in order.
func (s *Set) Hosts() []*Host { return s.state.Routes().Table.List }

// EpochOf is host h's epoch now (hoststate.Owner.Epoch), the one way
// the package and its callers read it: a pick, a dial, a login, a probe
// or a sample that begins reads it, and what it brings back is dropped if
// the host failed since. Once h has read host state's counter
// (hoststate.Owner.Counter) it is one atomic load; the counter outlives
// h, which the table holds only while its address is in host state's set.
func (s *Set) EpochOf(h *Host) hoststate.Epoch {
	c := h.epoch.Load()
	if c == nil {
		if c = s.state.Counter(h.Addr); c == nil {
			return 0
		}
		h.epoch.Store(c)
	}
	return hoststate.Epoch(c.Load())
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
		s.cfg.Telemetry.Closed(h.Server, telemetry.ClosedRemoved, h.openConns())
		h.Close() // waits for the connections in use to come back
	})
}

// closeGrace is how long Close lets pgconn's cancel requests and the
// draining of given-up connections run before it cuts them (see
// netconn.Sockets). On a host that answers they take milliseconds.
const closeGrace = time.Second

// ClosePools closes the pools of hosts and the following pools, in parallel,
// each waiting for its connections in use to be released, like
// pgxpool.Pool.Close, except on a host host state knows does not answer:
// statements in flight there are cut at once. Cancel requests and
// connections pgconn has given up on are waited for closeGrace at most,
// then cut, so a blackholed host does not hold Close for pgconn's 15 s.
func (s *Set) ClosePools(hosts []*Host, following ...*pgxpool.Pool) {
	for _, h := range hosts {
		h.Socks.KillIfDown()
	}
	var pools sync.WaitGroup
	for _, h := range hosts {
		pools.Go(h.Close)
	}
	for _, f := range following {
		pools.Go(f.Close)
	}
	closed := make(chan struct{})
	go func() { pools.Wait(); close(closed) }()
	awaitClosed(s.cfg.Clock, closed, func() {
		for _, h := range hosts {
			h.Socks.Abandon()
		}
	})
}

// awaitClosed waits until closed is closed. If closeGrace passes on clk
// first, it calls cut, which makes what closed waits for finish, and
// waits on.
func awaitClosed(clk clock.Clock, closed <-chan struct{}, cut func()) {
	t := clk.NewTimer(closeGrace)
	select {
	case <-closed:
	case <-t.C():
		cut()
	}
	t.Stop()
	<-closed
}

// Connect opens one connection to the host at addr, within timeout,
// checks the server's role against the Set's target (recording it), and
// closes it (tryConnect). With Cut and Attrs, it makes the Set the
// hosts patroni.LocalFirst connects to.
func (s *Set) Connect(ctx context.Context, addr string, timeout time.Duration) error {
	h := s.state.Routes().Table.ByAddr[addr]
	if h == nil { // left the Pool since the round looked
		return fmt.Errorf("%s: %w", addr, ErrHostNotUsable)
	}
	return s.tryConnect(ctx, h, timeout)
}

// Cut closes the connections of the calls pool of the host at addr:
// the local-first fallback's lifetime on that host ran out.
func (s *Set) Cut(addr string) {
	if h := s.state.Routes().Table.ByAddr[addr]; h != nil {
		s.cfg.Telemetry.Closed(h.Server, telemetry.ClosedFallbackLifetime, int(h.Calls.Stat().TotalConns()))
		h.Calls.Reset()
	}
}

// Attrs returns the attributes of the host at addr on metric points,
// false when the Set has no such host.
func (s *Set) Attrs(addr string) ([]attribute.KeyValue, bool) {
	if h := s.state.Routes().Table.ByAddr[addr]; h != nil {
		return h.Server.Attributes(), true
	}
	return nil, false
}
