package hostpool

import (
	"context"
	"log/slog"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/internal/telemetry"
)

// ProbeResult is what one probe of a host found, with the host's epoch
// when the probe began (hoststate.Owner.Epoch).
type ProbeResult struct {
	probe.Result
	since hoststate.Epoch
}

// ProbeOnce runs one probe of host h. Its result carries the host's epoch
// as the probe began, so that an answer that arrives after a newer failure
// is not taken for news (Probed).
func (s *Set) ProbeOnce(ctx context.Context, h *Host, plan probe.Plan) ProbeResult {
	since := s.EpochOf(h)
	h.Probes.Add(1)
	return ProbeResult{Result: h.Probe.Run(ctx, s.cfg.Clock, s.cfg.ProbeConnectTimeout, s.cfg.HealthProbeTimeout, plan), since: since}
}

// Probed records a probe's outcome on host h. An answer to a probe that
// began before the host's latest failure says nothing of the host now (a
// server shutting down can answer a question it was already asked): host
// state drops it, and the next probe asks again.
func (s *Set) Probed(h *Host, r ProbeResult) {
	s.cfg.Telemetry.Probed(h.Server, r.Err)
	if s.full(h, r.Err) {
		return
	}
	res := s.Observe(h, hoststate.Observation{Kind: hoststate.Probed, Probe: r.Result, Since: r.since})
	if res.Dropped {
		return
	}
	if r.Err == nil {
		h.Socks.Up()
		if !s.waits.state().Waiting && !s.inUse(h) {
			// Dormant: the Pool holds no connection on a host it does
			// not use (probe.Schedule).
			h.Probe.Close()
		}
		return
	}
	if hosthealth.Unanswered(r.Err) {
		// Nothing in flight there will be answered either.
		h.Socks.Kill()
		if res.Before.State <= hosthealth.Unknown {
			// The pools let go of the connections just cut, so that
			// none is counted again when it is next acquired.
			s.cfg.Telemetry.Closed(h.Server, telemetry.ClosedSilentHost, h.openConns())
			h.Calls.Reset()
			h.Reads.Reset()
		}
	}
	if hosthealth.Classify(r.Err) != hosthealth.NotFailover {
		s.cfg.Failed(h.Addr, r.Err)
	}
	if res.After.State != res.Before.State {
		s.cfg.Log.WarnHost(h.Addr, "pgfailover: probe failed", slog.String("error", r.Err.Error()))
		if res.After.State > hosthealth.Unknown {
			s.cfg.Refresh() // a host went down: the cluster may have moved
		}
	}
}

// full reports whether err says that the server of host h refused a new
// connection for lack of slots (hosthealth.Full) while the host's pools
// hold connections there: the server is up and they work on, so it is
// no failover event. The probe backs off as from a server that refuses
// for now (probe.Busy); a host with no connection open is marked as
// usual, since nothing of the Pool's reaches it.
func (s *Set) full(h *Host, err error) bool {
	return hosthealth.Full(err) && h.openConns() > 0
}

// StartProbe starts h's probe loop (probe.Loop): every
// health_probe_interval while no call waits, faster while calls wait for a
// usable host, with a backoff of its own while the host cannot be
// reached, and at once when the topology source names it the new primary
// (see HintPrimary). The loop ends, and closes its connection, when the
// Set's life ends or h is retired. Called with the Pool's host-set lock
// held.
func (s *Set) StartProbe(h *Host) {
	ctx, stop := context.WithCancel(s.cfg.Life)
	h.stopProbe = stop
	loop := probe.Loop{
		Schedule: s.cfg.Schedule,
		Clock:    s.cfg.Clock,
		Hint:     h.hint,
		Nudge:    h.nudge,
		Host:     probeHost{s, h},
	}
	s.cfg.Go(func() {
		defer close(h.probeDone)
		defer h.Probe.Close()
		loop.Run(ctx)
	})
}

// probeHost is what host h's probe loop needs of the Set.
type probeHost struct {
	s *Set
	h *Host
}

func (ph probeHost) Wake() <-chan struct{} { return ph.s.waits.woken() }
func (ph probeHost) Wait() probe.Wait      { return ph.s.waits.state() }
func (ph probeHost) ClaimedPrimary() bool  { return ph.s.claimedPrimary(ph.h.Addr) }
func (ph probeHost) Watchable() bool       { return ph.s.watchable(ph.h) }
func (ph probeHost) InUse() bool           { return ph.s.inUse(ph.h) }

// Probe runs one probe of the host and records it. While calls wait for a
// primary, connections are readied on the likeliest standby first
// (standby.go).
func (ph probeHost) Probe(ctx context.Context, plan probe.Plan, waiting bool) probe.Finding {
	s, h := ph.s, ph.h
	if waiting {
		s.readyForPromotion()
	}
	r := s.ProbeOnce(ctx, h, plan)
	s.Probed(h, r)
	s.dropUnusedStandby(h)
	return s.outcome(r.Result)
}

// outcome is what probe result r comes to for the probe's schedule: an
// answer from a standby that streams WAL from a primary, while the Set's
// target needs a primary, is Lagging: a primary lives elsewhere, and the
// host's name (an endpoint, a Service, a DNS name) may lag behind it.
func (s *Set) outcome(r probe.Result) probe.Finding {
	o := probe.FindingOf(r.Err)
	if o == probe.Answered && s.awaitsPromotion() && r.Role == hosthealth.RoleReplica && r.Receiving {
		return probe.Lagging
	}
	return o
}

// inUse reports whether the Pool uses host h: the Reader has read (any
// host may then serve its reads), or the target accepts the host's role,
// reported or else claimed, or that role is not known yet. A host not in
// use is probed rarely while no call waits, on a connection given up
// after each answer (probe.Schedule's Dormant).
func (s *Set) inUse(h *Host) bool {
	if s.readsUsed.Load() {
		return true
	}
	st, ok := s.state.Routes().Status(h.Addr)
	if !ok {
		return false
	}
	role := st.Role
	if role == hosthealth.RoleUnknown {
		role = st.Claimed
	}
	return role == hosthealth.RoleUnknown || s.cfg.Target.Accepts(role)
}

// promotable reports whether host h is a replica, last seen read-only,
// whose promotion would make it usable for the Set's target (primary,
// read-write).
func (s *Set) promotable(h *Host) bool {
	if !s.awaitsPromotion() {
		return false
	}
	st, ok := s.state.Routes().Status(h.Addr)
	return ok && st.Role == hosthealth.RoleReplica
}

// awaitsPromotion reports whether the Set's target takes a primary and
// not a replica (primary, read-write): the targets for which a replica
// becomes usable by being promoted.
func (s *Set) awaitsPromotion() bool {
	t := s.cfg.Target
	return t.Accepts(hosthealth.RolePrimary) && !t.Accepts(hosthealth.RoleReplica)
}

// watchable reports whether host h is promotable and its probe connection
// can watch for the promotion.
func (s *Set) watchable(h *Host) bool {
	return !h.Probe.Unwatched() && s.promotable(h)
}

// HintPrimary tells h's probe loop that the topology source now names it
// the primary, so that it probes the host at once (see
// probe.Schedule.Hinted). A hint already pending is enough. A host whose
// loop has not started is not hinted: its loop, once started, probes it on
// its schedule. Called with the Pool's host-set lock held, which guards
// the loop's start.
func (s *Set) HintPrimary(h *Host) {
	if h.stopProbe == nil {
		return
	}
	select {
	case h.hint <- struct{}{}:
	default:
	}
}

// nudgeAll tells every host's probe loop that the hosts in use changed
// (see inUse), so that a dormant host is probed on the schedule of one in
// use from now on.
func (s *Set) nudgeAll() {
	for _, h := range s.Hosts() {
		select {
		case h.nudge <- struct{}{}:
		default:
		}
	}
}

// claimedPrimary reports whether a topology source claims the host at
// addr is the primary.
func (s *Set) claimedPrimary(addr string) bool {
	st, ok := s.state.Routes().Status(addr)
	return ok && st.Claimed == hosthealth.RolePrimary
}
