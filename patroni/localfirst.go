package patroni

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/flight"
	"github.com/pgfailover/pgfailover/topology"
)

// Connector is what a LocalFirst needs of the pool whose calls it steers.
// Its methods are called from LocalFirst's goroutines, several at once,
// and must be safe for concurrent use.
type Connector interface {
	// Connect opens one connection to the host at addr, within timeout
	// and ctx, checks that the server is in a role the pool's target
	// accepts, and closes it. LocalFirst calls it only for a host Attrs
	// knows.
	Connect(ctx context.Context, addr string, timeout time.Duration) error
	// Cut closes the pool's connections to the host at addr: the fallback
	// host's, once they have lived Lifetime.
	Cut(addr string)
	// Attrs returns the attributes of the host at addr on metric points,
	// and whether the pool has a host at addr.
	Attrs(addr string) (attrs []attribute.KeyValue, ok bool)
}

// LocalFirstConfig configures a LocalFirst.
type LocalFirstConfig struct {
	// Fallback makes the decisions; its Local is the local server.
	Fallback *Fallback
	// Connector connects to the pool's hosts and cuts their connections.
	Connector Connector
	// Life ends when the pool closes: it stops discovery rounds, waits
	// and the fallback host's lifetime.
	Life context.Context
	// Go runs f on a goroutine that the pool's Close waits for.
	Go func(f func())
	// clock is the pool's clock; nil means the wall clock. A Pool sets it
	// (clock.Configure).
	clock clock.Clock
	// Meter records the gauges pgfailover.fallback.active and
	// pgfailover.fallback.host and the counter
	// pgfailover.fallback.candidate_failures; nil records nothing.
	Meter metric.Meter
	// Attributes go on every point that is not about one host (the
	// pool's own, such as db.system.name); a host's come from Attrs.
	Attributes []attribute.KeyValue
	// Logger, when set, gets an Info line for each fallback host found.
	Logger *slog.Logger
}

// LocalFirst is the local-first fallback at work: the local server takes
// the pool's calls; when it fails, calls go to a fallback host found by
// racing the cluster's synchronous standbys, then the other members, as a
// pooler beside the server would. Fallback makes the decisions; LocalFirst
// runs the discovery rounds they ask for, through the Connector, and
// reports what happened back to it. It is safe for concurrent use.
type LocalFirst struct {
	cfg LocalFirstConfig
	fb  *Fallback // cfg.Fallback

	candidateFailed metric.Int64Counter // pgfailover.fallback.candidate_failures

	rounds flight.Group[string] // the discovery round under way, which every caller shares; it ends with the winner
}

// NewLocalFirst checks cfg and returns a LocalFirst that has run nothing
// yet.
func NewLocalFirst(cfg LocalFirstConfig) (*LocalFirst, error) {
	if cfg.Fallback == nil || cfg.Connector == nil || cfg.Life == nil || cfg.Go == nil {
		return nil, errors.New("patroni: LocalFirstConfig needs Fallback, Connector, Life and Go")
	}
	if cfg.clock == nil {
		cfg.clock = clock.Real()
	}
	if cfg.Meter == nil {
		cfg.Meter = noop.NewMeterProvider().Meter(instrumentationName)
	}
	failures, err := cfg.Meter.Int64Counter("pgfailover.fallback.candidate_failures",
		metric.WithDescription("Local-first fallback: candidates that failed to connect in a discovery round, by reason."),
		metric.WithUnit("{failure}"))
	if err != nil {
		return nil, err
	}
	return &LocalFirst{cfg: cfg, fb: cfg.Fallback, candidateFailed: failures}, nil
}

// Choose returns the address the pool sends a call to (the local server,
// or the fallback host in force), or "" to let the pool's ranking choose.
// When a discovery round is due it starts one and waits for it, at most
// QueryWaitTimeout, or until ctx or Life ends.
func (lf *LocalFirst) Choose(ctx context.Context) string {
	d := lf.fb.Decide(lf.cfg.clock.Now())
	if d.Action == Discover {
		lf.wait(ctx, lf.discover())
		d = lf.fb.Decide(lf.cfg.clock.Now())
	}
	if d.Action == Discover {
		return ""
	}
	return d.Addr
}

// SetMembers hands the topology source's report to the Fallback: its
// candidates.
func (lf *LocalFirst) SetMembers(members []topology.Member) { lf.fb.SetMembers(members) }

// Budget bounds a call's failover budget, given the configured one: no
// call waits past QueryWaitTimeout.
func (lf *LocalFirst) Budget(configured time.Duration) time.Duration {
	return min(configured, lf.fb.cfg.QueryWaitTimeout)
}

// Failed records that a call or probe failed on the host at addr with
// err: the local server goes into its cooldown (unless err is a refusal
// of the credentials, see Reason.FallsBack), and the fallback host in
// force, whatever err, is dropped and another looked for. A failure on
// any other host changes nothing.
func (lf *LocalFirst) Failed(addr string, err error) {
	now := lf.cfg.clock.Now()
	reason := ReasonOf(err)
	switch {
	case addr == lf.fb.cfg.Local:
		lf.fb.LocalFailed(now, reason)
	case lf.isActive(addr, now):
		if lf.fb.CandidateFailed(addr, now, reason) {
			lf.discover()
		}
	}
}

func (lf *LocalFirst) isActive(addr string, now time.Time) bool {
	active, ok := lf.fb.Active(now)
	return ok && active == addr
}

// Register reports the gauges pgfailover.fallback.active and
// pgfailover.fallback.host on the Meter at each collection, until the
// registration is unregistered.
func (lf *LocalFirst) Register() (metric.Registration, error) {
	meter := lf.cfg.Meter
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
		addr, ok := lf.fb.Active(lf.cfg.clock.Now())
		var on int64
		if ok {
			on = 1
			server, known := lf.cfg.Connector.Attrs(addr)
			if !known {
				server = append(slices.Clip(lf.cfg.Attributes), attribute.String("server.address", addr))
			}
			o.ObserveInt64(host, 1, metric.WithAttributes(server...))
		}
		o.ObserveInt64(active, on, metric.WithAttributes(lf.cfg.Attributes...))
		return nil
	}, active, host)
}

// wait waits for a discovery round to end, for QueryWaitTimeout, or for
// ctx or Life.
func (lf *LocalFirst) wait(ctx context.Context, round <-chan struct{}) {
	t := lf.cfg.clock.NewTimer(lf.fb.cfg.QueryWaitTimeout)
	defer t.Stop()
	select {
	case <-round:
	case <-t.C():
	case <-ctx.Done():
	case <-lf.cfg.Life.Done():
	}
}

// discover starts a discovery round unless one runs, and returns a channel
// closed when it ends. Every caller told to discover at once shares it.
func (lf *LocalFirst) discover() <-chan struct{} {
	return lf.rounds.Start(lf.cfg.Life, lf.cfg.Go, lf.runRound)
}

// runRound races the candidates of each wave in turn until one connects in
// a role the pool's target accepts, and returns its address, or "" when
// none did before life or the plan's time ended.
func (lf *LocalFirst) runRound(life context.Context) (string, error) {
	plan := lf.fb.Plan(lf.cfg.clock.Now())
	// The round lasts until the caller's deadline; each connect is bounded
	// by the plan's connect timeout on top (race), so a wave whose
	// candidates time out leaves time for the next.
	ctx, cancel := context.WithTimeout(life, plan.Deadline.Sub(lf.cfg.clock.Now()))
	defer cancel()
	for _, wave := range plan.Waves {
		if winner := lf.race(ctx, wave, plan); winner != "" {
			lf.won(winner)
			return winner, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return "", nil
}

// race connects to every candidate of wave at once and returns the first
// to connect in a role the target accepts, or "". A candidate the pool
// has no host for is passed over. A candidate that fails counts as failed
// unless it was cut short because another won or the round ended, and a
// connect that ran out of time counts whatever the cause.
func (lf *LocalFirst) race(ctx context.Context, wave Wave, plan Plan) string {
	ctx, cancel := context.WithCancel(ctx)
	results := make(chan string, len(wave))
	var wg sync.WaitGroup
	// The winner cuts the others' connects short before they are waited
	// for, or it would wait for the slowest of them.
	defer func() { cancel(); wg.Wait() }()
	for _, m := range wave {
		addr := m.Addr()
		server, ok := lf.cfg.Connector.Attrs(addr)
		if !ok {
			results <- ""
			continue
		}
		wg.Go(func() {
			err := lf.cfg.Connector.Connect(ctx, addr, plan.Timeout(lf.cfg.clock.Now()))
			if err == nil {
				results <- addr
				return
			}
			if ctx.Err() == nil || errors.Is(err, context.DeadlineExceeded) {
				reason := ReasonOf(err)
				lf.candidateFailed.Add(context.Background(), 1,
					metric.WithAttributes(append(slices.Clip(server), attribute.String("pgfailover.reason", reason.String()))...))
				lf.fb.CandidateFailed(addr, lf.cfg.clock.Now(), reason)
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
// have lived Lifetime, so that calls return to the local server once the
// cluster settles.
func (lf *LocalFirst) won(addr string) {
	lf.fb.Won(addr, lf.cfg.clock.Now())
	if lf.cfg.Logger != nil {
		lf.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, "pgfailover: local server down; calls go to a fallback host",
			slog.String("local", lf.fb.cfg.Local), slog.String("host", addr))
	}
	if _, ok := lf.cfg.Connector.Attrs(addr); !ok {
		return
	}
	lf.cfg.Go(func() {
		t := lf.cfg.clock.NewTimer(lf.fb.cfg.Lifetime)
		defer t.Stop()
		select {
		case <-t.C():
			lf.cfg.Connector.Cut(addr)
		case <-lf.cfg.Life.Done():
		}
	})
}

// ReasonOf sorts a connect's failure for the Fallback's decisions.
func ReasonOf(err error) Reason {
	if hosthealth.AuthRefused(err) {
		return ReasonAuth
	}
	if _, ok := errors.AsType[*pgconn.PgError](err); ok {
		return ReasonStartup
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ReasonRefused
	case errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err):
		return ReasonTimeout
	}
	if _, ok := errors.AsType[*hosthealth.RoleError](err); ok {
		return ReasonStartup // answering, but not in a role the target takes
	}
	return ReasonSocket
}
