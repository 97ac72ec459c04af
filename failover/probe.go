package failover

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/probe"
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

// probeAll probes every host and records what it finds. It fails with
// ErrNoHost, listing every host's outcome, when no host is reachable in a
// role the target accepts.
//
// Credentials hold cluster-wide, as pgx assumes when it stops at the first
// 28P01, so they are tried on one host at a time until a server has
// settled them: the hosts are probed in order, each alone, until one logs
// in (then the rest are probed in parallel) or refuses the credentials
// (then New returns that refusal, and no other host sees the password). A
// host that cannot be reached settles nothing and passes the turn at once;
// one whose server has sent nothing after firstProbeLead passes it, and is
// still waited for. One whose server has spoken keeps the turn until its
// probe ends, however loaded the server or the client: a slow login is
// not a host that is gone.
func (p *Pool) probeAll(ctx context.Context) error {
	hosts := p.state.Routes().Table.List
	if len(hosts) == 0 {
		return &FailoverError{Kind: ErrNoHost}
	}
	results := make([]probeResult, len(hosts))
	done := make(chan int, len(hosts))
	var wg sync.WaitGroup
	probe := func(i int) {
		hosts[i].probes.Add(1)
		wg.Go(func() {
			results[i] = p.probeOnce(ctx, hosts[i], probe.Watch{})
			done <- i
		})
	}
	next := 0
	for settled := false; !settled && next < len(hosts); {
		probe(next)
		next++
		t := p.clock.NewTimer(firstProbeLead)
	turn:
		for {
			select {
			case i := <-done:
				switch {
				case results[i].Err == nil:
					settled = true
				case hosthealth.Classify(results[i].Err) == hosthealth.Terminal:
					t.Stop()
					wg.Wait()
					for j := range next {
						p.probed(hosts[j], results[j])
					}
					return &HostError{Addr: hosts[i].addr, Err: results[i].Err}
				case i != next-1:
					// An earlier host, whose turn had passed, settled
					// nothing: the current one keeps its turn.
					continue
				}
				// Settled, or the current host settled nothing (it could
				// not be reached): the turn ends.
				break turn
			case <-t.C():
				if !hosts[next-1].socks.Answered() {
					break turn
				}
				// The server speaks: it is slow, not gone, and will
				// settle the credentials within the probe's timeout.
				t = p.clock.NewTimer(firstProbeLead)
			}
		}
		t.Stop()
	}
	for ; next < len(hosts); next++ {
		probe(next)
	}
	wg.Wait()

	fe := &FailoverError{Kind: ErrNoHost}
	var terminal *HostError
	usable := false
	for i, r := range results {
		h := hosts[i]
		p.probed(h, r)
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

// firstProbeLead is how long New waits for the server of a host whose
// probe has not ended to send something before it hands the turn to the
// next host.
const firstProbeLead = 500 * time.Millisecond

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
	p.telemetry.probed(h, r.Err)
	if r.Err == nil && r.Role == hosthealth.RolePrimary && p.reader != nil { // nil only in tests of the routing alone
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
			p.telemetry.closed(h, closedSilentHost, h.openConns())
			h.pool.Reset()
			h.reads.Reset()
		}
	}
	if hosthealth.Classify(r.Err) != hosthealth.NotFailover {
		p.steer.failed(h.addr, r.Err)
	}
	if res.After.State != res.Before.State {
		p.warnHost(h.addr, "pgfailover: probe failed", slog.String("error", r.Err.Error()))
		if res.After.State > hosthealth.Unknown {
			p.refreshTopology() // a host went down: the cluster may have moved
		}
	}
}

// startProbe starts h's probe loop, on the schedule probe.Schedule
// describes: every health_probe_interval while no call waits, faster while
// calls wait for a usable host, with a backoff of its own while the host
// cannot be reached, and at once when the topology source names it the
// new primary (see hintPrimary). The loop ends, and closes its
// connection, when the Pool closes or h leaves the topology. Called with
// topoMu held.
func (p *Pool) startProbe(h *hostPool) {
	ctx, stop := context.WithCancel(p.life)
	h.stopProbe = stop
	hint := make(chan struct{}, 1)
	if p.hints == nil {
		p.hints = make(map[string]chan struct{})
	}
	p.hints[h.addr] = hint
	sched := probe.Schedule{Idle: p.cfg.HealthProbeInterval, WaitMax: p.cfg.HealthProbeWaitMax, Rand: rand.Int64N}
	p.bg.Go(func() {
		defer close(h.probeDone)
		defer h.probe.Close()
		st := probe.State{Last: p.clock.Now()}
		for {
			// The wake channel is read before the waiters are counted: a
			// first waiter that arrives in between closes this very
			// channel, so the probe cannot sleep through it.
			wake := *p.wake.Load()
			now := p.clock.Now()
			w := p.waitState()
			claimed := p.claimedPrimary(h.addr)
			at := sched.Next(st, w, claimed, now)
			if plan := sched.Watch(st, w, claimed, p.watchable(h), now); plan.Checks > 0 {
				at = sched.AfterWatch(st, plan) // the watch itself waited
			}
			why := p.sleepUntil(ctx, at, wake, hint)
			if why == wakeWaiter {
				// The first waiter wakes every probe at once, but a
				// host inside its own backoff waits for its end.
				why = p.sleepUntil(ctx, sched.Woken(st, p.clock.Now()), nil, hint)
			}
			switch why {
			case wakeStopped:
				return
			case wakeHint:
				st = sched.Hinted(st, p.clock.Now())
				continue
			}
			h.probes.Add(1)
			st.Began = p.clock.Now()
			w = p.waitState()
			plan := sched.Watch(st, w, p.claimedPrimary(h.addr), p.watchable(h), st.Began)
			if w.Waiting {
				p.readyForPromotion()
			}
			r := p.probeOnce(ctx, h, plan)
			st = sched.Observe(st, probe.OutcomeOf(r.Err), p.clock.Now())
			p.probed(h, r)
			p.dropUnusedStandby(h)
		}
	})
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

// wakeup is why a probe loop's sleep ended.
type wakeup int

const (
	wakeTimeUp  wakeup = iota // the time it slept until came
	wakeWaiter                // the first call to wait closed the wake channel
	wakeHint                  // the topology source named the host the new primary
	wakeStopped               // the loop's context ended
)

// sleepUntil waits on the Pool's clock until at, until wake closes or a
// hint arrives, or until ctx ends, and says which came first. When at has
// passed it does not wait, but a hint already pending still counts: a
// replica watched without a pause between its watches (each watch waits
// itself) must still hear that it was named the primary.
func (p *Pool) sleepUntil(ctx context.Context, at time.Time, wake, hint <-chan struct{}) wakeup {
	d := at.Sub(p.clock.Now())
	if d <= 0 {
		if ctx.Err() != nil {
			return wakeStopped
		}
		select {
		case <-hint:
			return wakeHint
		default:
			return wakeTimeUp
		}
	}
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return wakeStopped
	case <-t.C():
		return wakeTimeUp
	case <-wake:
		return wakeWaiter
	case <-hint:
		return wakeHint
	}
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
