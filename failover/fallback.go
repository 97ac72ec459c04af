package failover

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/patroni"
	"github.com/pgfailover/pgfailover/topology"
)

var _ steerer = (*localFirst)(nil)

// localFirst is the local-first fallback (fallback_local): the connection
// string's first host is the local server and takes the Pool's calls;
// when it fails, calls go to a fallback host found by racing the cluster's
// synchronous standbys, then the other members, as a pooler beside the
// server would. The decisions are patroni.Fallback's; this type does the
// connecting and follows them.
type localFirst struct {
	p     *Pool
	local string
	fb    *patroni.Fallback

	candidateFailed metric.Int64Counter // pgfailover.fallback.candidate_failures

	// mu guards round. No I/O while held.
	mu    sync.Mutex
	round chan struct{} // closed when the discovery round under way ends; nil when none runs
}

func newLocalFirst(p *Pool) (*localFirst, error) {
	if len(p.cfg.Hosts) == 0 {
		return nil, &ConfigError{Key: keyFallbackLocal, Msg: "needs the local server as the connection string's first host"}
	}
	s := p.cfg.patroni
	fb, err := patroni.NewFallback(patroni.FallbackConfig{
		Local:            p.cfg.Hosts[0].Addr(),
		Cooldown:         s.fallbackCooldown,
		ConnectTimeout:   s.fallbackConnectTimeout,
		Lifetime:         s.fallbackLifetime,
		QueryWaitTimeout: s.queryWait,
	})
	if err != nil {
		return nil, &ConfigError{Key: keyFallbackLocal, Msg: err.Error(), Err: err}
	}
	failures, err := p.telemetry.meter.Int64Counter("pgfailover.fallback.candidate_failures",
		metric.WithDescription("Local-first fallback: candidates that failed to connect in a discovery round, by reason."),
		metric.WithUnit("{failure}"))
	if err != nil {
		return nil, err
	}
	return &localFirst{p: p, local: p.cfg.Hosts[0].Addr(), fb: fb, candidateFailed: failures}, nil
}

// choose returns the address the fallback sends the call to (the local
// server, or the fallback host in force), or "" to let the ranking
// choose. When a discovery round is due it starts one and waits for it, at
// most query_wait_timeout.
func (lf *localFirst) choose(ctx context.Context) string {
	d := lf.fb.Decide(lf.p.clock.Now())
	if d.Action == patroni.Discover {
		lf.wait(ctx, lf.discover())
		d = lf.fb.Decide(lf.p.clock.Now())
	}
	if d.Action == patroni.Discover {
		return ""
	}
	return d.Addr
}

// members hands the topology source's report to the fallback: its
// candidates.
func (lf *localFirst) members(members []topology.Member) { lf.fb.SetMembers(members) }

// budget bounds a call's failover budget: with local-first, no call waits
// past query_wait_timeout.
func (lf *localFirst) budget(configured time.Duration) time.Duration {
	return min(configured, lf.p.cfg.patroni.queryWait)
}

// register reports the gauges pgfailover.fallback.active and
// pgfailover.fallback.host.
func (lf *localFirst) register(meter metric.Meter) (metric.Registration, error) {
	active, err := meter.Int64ObservableGauge("pgfailover.fallback.active",
		metric.WithDescription("Local-first fallback: 1 while calls go to a fallback host instead of the local server, else 0."),
		metric.WithUnit("1"))
	if err != nil {
		return nil, err
	}
	host, err := meter.Int64ObservableGauge("pgfailover.fallback.host",
		metric.WithDescription("Local-first fallback: 1 for the fallback host in force, by address; absent when none."),
		metric.WithUnit("{host}"))
	if err != nil {
		return nil, err
	}
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		// Only the host in force is reported, so the old one's series
		// ends in the very collection the new one's begins.
		addr, ok := lf.fb.Active(lf.p.clock.Now())
		var on int64
		if ok {
			on = 1
			var server metric.ObserveOption = metric.WithAttributes(dbSystem, attribute.String("server.address", addr))
			if h := lf.p.state.Routes().Table.ByAddr[addr]; h != nil {
				server = h.server.observe()
			}
			o.ObserveInt64(host, 1, server)
		}
		o.ObserveInt64(active, on, metric.WithAttributes(dbSystem))
		return nil
	}, active, host)
}

// wait waits for a discovery round to end, for query_wait_timeout, or for
// ctx.
func (lf *localFirst) wait(ctx context.Context, round <-chan struct{}) {
	t := lf.p.clock.NewTimer(lf.p.cfg.patroni.queryWait)
	defer t.Stop()
	select {
	case <-round:
	case <-t.C():
	case <-ctx.Done():
	case <-lf.p.life.Done():
	}
}

// discover starts a discovery round unless one runs, and returns a channel
// closed when it ends. Every caller told to discover at once shares it.
func (lf *localFirst) discover() <-chan struct{} {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.round != nil {
		return lf.round
	}
	done := make(chan struct{})
	lf.round = done
	lf.p.bg.Go(func() {
		defer func() {
			lf.mu.Lock()
			lf.round = nil
			lf.mu.Unlock()
			close(done)
		}()
		lf.runRound()
	})
	return done
}

// runRound races the candidates of each wave in turn until one connects in
// a role the Pool's target accepts.
func (lf *localFirst) runRound() {
	plan := lf.fb.Plan(lf.p.clock.Now())
	ctx, cancel := context.WithTimeout(lf.p.life, plan.Timeout(lf.p.clock.Now()))
	defer cancel()
	for _, wave := range plan.Waves {
		if winner := lf.race(ctx, wave, plan); winner != "" {
			lf.won(winner)
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// race connects to every candidate of wave at once and returns the first
// to connect in a role the target accepts, or "".
func (lf *localFirst) race(ctx context.Context, wave patroni.Wave, plan patroni.Plan) string {
	ctx, cancel := context.WithCancel(ctx)
	table := lf.p.state.Routes().Table
	results := make(chan string, len(wave))
	var wg sync.WaitGroup
	// The winner cuts the others' connects short before they are waited
	// for, or it would wait for the slowest of them.
	defer func() { cancel(); wg.Wait() }()
	for _, m := range wave {
		h := table.ByAddr[m.Addr()]
		if h == nil {
			results <- ""
			continue
		}
		wg.Go(func() {
			err := lf.p.tryConnect(ctx, h, plan.ConnectTimeout)
			if err == nil {
				results <- h.addr
				return
			}
			if ctx.Err() == nil || errors.Is(err, context.DeadlineExceeded) {
				lf.candidateFailed.Add(context.Background(), 1, h.server.with(attribute.String("pgfailover.reason", fallbackReason(err).String())))
				lf.fb.CandidateFailed(h.addr, lf.p.clock.Now(), fallbackReason(err))
			}
			results <- ""
		})
	}
	for range wave {
		if addr := <-results; addr != "" {
			return addr
		}
	}
	return ""
}

// won makes addr the fallback host, and cuts its connections once they
// have lived fallback_lifetime, so that calls return to the local server
// once the cluster settles.
func (lf *localFirst) won(addr string) {
	lf.fb.Won(addr, lf.p.clock.Now())
	lf.p.logInfo("pgfailover: local server down; calls go to a fallback host", slog.String("local", lf.local), slog.String("host", addr))
	h := lf.p.state.Routes().Table.ByAddr[addr]
	if h == nil {
		return
	}
	lf.p.bg.Go(func() {
		t := lf.p.clock.NewTimer(lf.p.cfg.patroni.fallbackLifetime)
		defer t.Stop()
		select {
		case <-t.C():
			lf.p.telemetry.closed(h, closedFallbackLifetime, int(h.pool.Stat().TotalConns()))
			h.pool.Reset()
		case <-lf.p.life.Done():
		}
	})
}

// failed records that a call or probe failed on the host at addr.
func (lf *localFirst) failed(addr string, err error) {
	now := lf.p.clock.Now()
	reason := fallbackReason(err)
	switch {
	case addr == lf.local:
		lf.fb.LocalFailed(now, reason)
	case lf.isActive(addr):
		if lf.fb.CandidateFailed(addr, now, reason) {
			lf.discover()
		}
	}
}

func (lf *localFirst) isActive(addr string) bool {
	active, ok := lf.fb.Active(lf.p.clock.Now())
	return ok && active == addr
}

// tryConnect opens one connection to h, checks the server's role against
// the Pool's target, and closes it.
func (p *Pool) tryConnect(ctx context.Context, h *hostPool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cfg := h.dial.Copy()
	if h.probe.BeforeConnect != nil {
		if err := h.probe.BeforeConnect(ctx, cfg); err != nil {
			return err
		}
	}
	cfg.DialFunc = h.socks.DialFunc(cfg.DialFunc, false)
	since := p.state.Epoch(h.addr)
	conn, err := pgconn.ConnectConfig(ctx, &cfg.Config)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	role, err := serverRole(ctx, conn)
	if err != nil {
		return err
	}
	if p.observe(h, hoststate.Observation{Kind: hoststate.Answered, Role: role, Since: since}).Dropped {
		return errFailedWhileConnecting
	}
	if !p.cfg.Target.Accepts(role) {
		return &hosthealth.RoleError{Addr: h.addr, Role: role, Target: p.cfg.Target}
	}
	return nil
}

// fallbackReason sorts a connect failure for the fallback's decisions.
func fallbackReason(err error) patroni.Reason {
	if hosthealth.AuthRefused(err) {
		return patroni.ReasonAuth
	}
	if _, ok := errors.AsType[*pgconn.PgError](err); ok {
		return patroni.ReasonStartup
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return patroni.ReasonRefused
	case errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err):
		return patroni.ReasonTimeout
	}
	if _, ok := errors.AsType[*hosthealth.RoleError](err); ok {
		return patroni.ReasonStartup // answering, but not in a role the target takes
	}
	return patroni.ReasonSocket
}
