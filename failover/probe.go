package failover

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/internal/telemetry"
	"github.com/pgfailover/pgfailover/replica"
)

// probeResult is what one probe of a host found, with the host's epoch
// when the probe began (hoststate.Owner.Epoch).
type probeResult struct {
	probe.Result
	since uint64
}

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
	hosts := p.state.Routes().Table.List
	if len(hosts) == 0 {
		return &FailoverError{Kind: ErrNoHost}
	}
	results := make([]probeResult, len(hosts))
	ran, refused := probe.First(ctx, p.clock, len(hosts), func(i int) error {
		hosts[i].probes.Add(1)
		results[i] = p.probeOnce(ctx, hosts[i], probe.Watch{})
		return results[i].Err
	}, func(i int) bool { return hosts[i].socks.Answered() })
	for i := range ran {
		p.probed(hosts[i], results[i])
	}
	if refused >= 0 {
		return &HostError{Addr: hosts[refused].addr, Err: results[refused].Err}
	}

	fe := &FailoverError{Kind: ErrNoHost}
	var terminal *HostError
	usable := false
	for i, r := range results {
		h := hosts[i]
		switch {
		case r.Err != nil:
			fe.Hosts = append(fe.Hosts, HostError{Addr: h.addr, Err: r.Err})
			if terminal == nil && hosthealth.Classify(r.Err) == hosthealth.Terminal {
				terminal = &HostError{Addr: h.addr, Err: r.Err}
			}
		case !p.cfg.Target.Accepts(r.Role):
			fe.Hosts = append(fe.Hosts, HostError{Addr: h.addr, Err: &hosthealth.RoleError{Addr: h.addr, Role: r.Role, Target: p.cfg.Target}})
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

// probeOnce runs one probe of host h. Its result carries the host's epoch
// as the probe began, so that an answer that arrives after a newer failure
// is not taken for news (probed).
func (p *Pool) probeOnce(ctx context.Context, h *hostPool, watch probe.Watch) probeResult {
	since := p.state.Epoch(h.addr)
	return probeResult{Result: h.probe.Run(ctx, p.clock.Now, p.probeTimeout(), p.cfg.HealthProbeTimeout, watch), since: since}
}

// probed records a probe's outcome on host h. An answer to a probe that
// began before the host's latest failure says nothing of the host now (a
// server shutting down can answer a question it was already asked): host
// state drops it, and the next probe asks again.
func (p *Pool) probed(h *hostPool, r probeResult) {
	p.telemetry.Probed(h.server, r.Err)
	// The Reader's pins read the primary's samples: one is kept before the
	// routes that may make its host the primary are published, and only
	// from an answer that host state takes.
	if r.Err == nil && r.Role == hosthealth.RolePrimary && p.reader != nil && !p.state.Stale(h.addr, r.since) { // reader is nil only in tests of the routing alone
		p.reader.sampler.Observe(h.addr, replica.Sample{LSN: r.WAL, At: r.Asked})
	}
	res := p.observe(h, hoststate.Observation{Kind: hoststate.Probed, Probe: r.Result, Since: r.since})
	if res.Dropped {
		return
	}
	if r.Err == nil {
		h.socks.Up()
		return
	}
	if hosthealth.Unanswered(r.Err) {
		// Nothing in flight there will be answered either.
		h.socks.Kill()
		if res.Before.State <= hosthealth.Unknown {
			// The pools let go of the connections just cut, so that
			// none is counted again when it is next acquired.
			p.telemetry.Closed(h.server, telemetry.ClosedSilentHost, h.openConns())
			h.pool.Reset()
			h.reads.Reset()
		}
	}
	if hosthealth.Classify(r.Err) != hosthealth.NotFailover {
		p.steer.failed(h.addr, r.Err)
	}
	if res.After.State != res.Before.State {
		p.log.WarnHost(h.addr, "pgfailover: probe failed", slog.String("error", r.Err.Error()))
		if res.After.State > hosthealth.Unknown {
			p.refreshTopology() // a host went down: the cluster may have moved
		}
	}
}

// startProbe starts h's probe loop (probe.Loop): every
// health_probe_interval while no call waits, faster while calls wait for a
// usable host, with a backoff of its own while the host cannot be
// reached, and at once when the topology source names it the new primary
// (see hintPrimary). The loop ends, and closes its connection, when the
// Pool closes or h leaves the topology. Called with topoMu held.
func (p *Pool) startProbe(h *hostPool) {
	ctx, stop := context.WithCancel(p.life)
	h.stopProbe = stop
	hint := make(chan struct{}, 1)
	if p.hints == nil {
		p.hints = make(map[string]chan struct{})
	}
	p.hints[h.addr] = hint
	loop := probe.Loop{
		Schedule: probe.Schedule{Idle: p.cfg.HealthProbeInterval, WaitMax: p.cfg.HealthProbeWaitMax, Rand: rand.Int64N},
		Clock:    p.clock,
		Hint:     hint,
		Host:     probeHost{p, h},
	}
	p.bg.Go(func() {
		defer close(h.probeDone)
		defer h.probe.Close()
		loop.Run(ctx)
	})
}

// probeHost is what host h's probe loop needs of the Pool.
type probeHost struct {
	p *Pool
	h *hostPool
}

func (ph probeHost) Wake() <-chan struct{} { return *ph.p.wake.Load() }
func (ph probeHost) Wait() probe.Wait      { return ph.p.waitState() }
func (ph probeHost) ClaimedPrimary() bool  { return ph.p.claimedPrimary(ph.h.addr) }
func (ph probeHost) Watchable() bool       { return ph.p.watchable(ph.h) }

// Probe runs one probe of the host and records it. While calls wait for a
// primary, connections are readied on the likeliest standby first
// (standby.go).
func (ph probeHost) Probe(ctx context.Context, plan probe.Watch, waiting bool) error {
	p, h := ph.p, ph.h
	h.probes.Add(1)
	if waiting {
		p.readyForPromotion()
	}
	r := p.probeOnce(ctx, h, plan)
	p.probed(h, r)
	p.dropUnusedStandby(h)
	return r.Err
}

// promotable reports whether host h is a replica, last seen read-only,
// whose promotion would make it usable for the Pool's target (primary,
// read-write).
func (p *Pool) promotable(h *hostPool) bool {
	if !p.awaitsPromotion() {
		return false
	}
	s, ok := p.status(h.addr)
	return ok && s.Role == hosthealth.RoleReplica
}

// awaitsPromotion reports whether the Pool's target takes a primary and
// not a replica (primary, read-write): the targets for which a replica
// becomes usable by being promoted.
func (p *Pool) awaitsPromotion() bool {
	t := p.cfg.Target
	return t.Accepts(hosthealth.RolePrimary) && !t.Accepts(hosthealth.RoleReplica)
}

// watchable reports whether host h is promotable and its probe connection
// can watch for the promotion.
func (p *Pool) watchable(h *hostPool) bool {
	return !h.probe.Unwatched() && p.promotable(h)
}

// hintPrimary tells the probe loop of the host at addr that the topology
// source now names it the primary, so that it probes the host at once (see
// probe.Schedule.Hinted). A hint already pending is enough. Called with
// topoMu held.
func (p *Pool) hintPrimary(addr string) {
	select {
	case p.hints[addr] <- struct{}{}:
	default:
	}
}

// waitState reports whether calls wait for a usable host, and since when.
func (p *Pool) waitState() probe.Wait {
	if p.waiting.Load() == 0 {
		return probe.Wait{}
	}
	return probe.Wait{Waiting: true, Since: time.Unix(0, p.waitSince.Load())}
}

// claimedPrimary reports whether a topology source claims the host at
// addr is the primary.
func (p *Pool) claimedPrimary(addr string) bool {
	s, ok := p.status(addr)
	return ok && s.Claimed == hosthealth.RolePrimary
}

// waitStarted tells the probes that a call is waiting for a usable host.
// The first waiter wakes every probe at once. A wait that begins at
// least sameOutage after the last one ended starts the list of waiting
// statements afresh; one that begins sooner (a call woken by a change
// of the routing state that waits again) belongs to the same outage.
func (p *Pool) waitStarted() {
	if p.waiting.Add(1) == 1 {
		now := p.clock.Now().UnixNano()
		p.waitSince.Store(now)
		if now-p.waitEndedAt.Load() >= int64(sameOutage) {
			p.waitingSQL.reset()
		}
		next := make(chan struct{})
		close(*p.wake.Swap(&next))
		p.refreshTopology()
	}
}

// sameOutage is how soon after the last wait ended a new one belongs to
// the same outage (waitStarted).
const sameOutage = time.Second

// waitEnded undoes waitStarted.
func (p *Pool) waitEnded() {
	if p.waiting.Add(-1) == 0 {
		p.waitEndedAt.Store(p.clock.Now().UnixNano())
	}
}
