package failover

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/replica"
)

// instrumentationName names the meter and tracer of this library.
const instrumentationName = "github.com/pgfailover/pgfailover"

// telemetry holds the Pool's OpenTelemetry instruments. Nothing here runs
// on a call that meets no failover event.
type telemetry struct {
	meter         metric.Meter
	survivedCount metric.Int64Counter
	failedCount   metric.Int64Counter
	waitTime      metric.Float64Histogram
	reads         metric.Int64Counter
	readAttrs     [2][numReasons][]metric.AddOption // by destination (replica, primary) and reason
	tracer        trace.Tracer
}

// numReasons is the number of replica.Reason values.
const numReasons = replica.NumReasons

func newTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) (*telemetry, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	m := mp.Meter(instrumentationName)
	survived, err := m.Int64Counter("pgfailover.failover.survived",
		metric.WithDescription("Calls that completed after at least one failover event."),
		metric.WithUnit("{call}"))
	if err != nil {
		return nil, err
	}
	failed, err := m.Int64Counter("pgfailover.failover.failed",
		metric.WithDescription("Calls that met a failover event and could not complete safely."),
		metric.WithUnit("{call}"))
	if err != nil {
		return nil, err
	}
	wait, err := m.Float64Histogram("pgfailover.failover.wait",
		metric.WithDescription("Time calls spent waiting for a host that could take them, per call that waited."),
		metric.WithUnit("s"))
	if err != nil {
		return nil, err
	}
	reads, err := m.Int64Counter("pgfailover.reads",
		metric.WithDescription("Reads the Reader sent, by destination (replica or primary) and reason (eligible, caught_up, waited, pinned, lagging, unavailable)."),
		metric.WithUnit("{read}"))
	if err != nil {
		return nil, err
	}
	t := &telemetry{meter: m, survivedCount: survived, failedCount: failed, waitTime: wait, reads: reads, tracer: tp.Tracer(instrumentationName)}
	for d, dest := range []string{"replica", "primary"} {
		for r := range numReasons {
			// Built once: recording then allocates nothing.
			t.readAttrs[d][r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
				attribute.String("pgfailover.destination", dest),
				attribute.String("pgfailover.reason", replica.Reason(r).String()),
			))}
		}
	}
	return t, nil
}

// readRouted counts a read the Reader sent, to a replica or the primary.
func (t *telemetry) readRouted(ctx context.Context, reason replica.Reason) {
	dest := 1
	if reason.OnReplica() {
		dest = 0
	}
	t.reads.Add(ctx, 1, t.readAttrs[dest][reason]...)
}

// registerHosts reports every host of p, at each collection, as the gauge
// pgfailover.host.state: 1 per host, with its address, its state for the
// Pool's target and its role as attributes; and each replica whose
// staleness bound is known as the gauge pgfailover.replica.staleness.
// Unregister it at Close.
func (t *telemetry) registerHosts(p *Pool) (metric.Registration, error) {
	gauge, err := t.meter.Int64ObservableGauge("pgfailover.host.state",
		metric.WithDescription("Each host the Pool knows, with its state for the Pool's target and its role; always 1."),
		metric.WithUnit("{host}"))
	if err != nil {
		return nil, err
	}
	stale, err := t.meter.Float64ObservableGauge("pgfailover.replica.staleness",
		metric.WithDescription("Upper bound on how stale each replica is: the age of the newest primary WAL sample it has replayed. Absent while unknown."),
		metric.WithUnit("s"))
	if err != nil {
		return nil, err
	}
	return t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		rs := p.routes.Load()
		s := rs.health
		now := p.clock.Now()
		for i := range s.Len() {
			h := s.Host(i)
			host := attribute.String("pgfailover.host", h.Addr)
			o.ObserveInt64(gauge, 1, metric.WithAttributes(
				host,
				attribute.String("pgfailover.state", s.State(i, p.cfg.Target).String()),
				attribute.String("pgfailover.role", h.Role.String()),
			))
			if bound, ok := rs.hosts[i].fresh.Staleness(now); ok {
				o.ObserveFloat64(stale, bound.Seconds(), metric.WithAttributes(host))
			}
		}
		return nil
	}, gauge, stale)
}

// waited records that a call waited d for a usable host.
func (t *telemetry) waited(ctx context.Context, span trace.Span, d time.Duration) {
	t.waitTime.Record(ctx, d.Seconds())
	span.AddEvent("waited for a usable host", trace.WithAttributes(attribute.Float64("pgfailover.wait_seconds", d.Seconds())))
}

// startEpisode starts the span of one call's failover episode: from its
// first failover event to its outcome.
func (t *telemetry) startEpisode(ctx context.Context) trace.Span {
	_, span := t.tracer.Start(ctx, "pgfailover.failover", trace.WithSpanKind(trace.SpanKindClient))
	return span
}

// hostFailed adds an event for one host that failed during the episode.
func (t *telemetry) hostFailed(span trace.Span, addr string, class hosthealth.Class, err error) {
	span.AddEvent("host failed", trace.WithAttributes(
		attribute.String("pgfailover.host", addr),
		attribute.String("pgfailover.class", class.String()),
		attribute.String("error.message", err.Error()),
	))
}

// endEpisode ends the episode's span with the call's outcome.
func (t *telemetry) endEpisode(span trace.Span, err error) {
	outcome := "survived"
	switch {
	case errors.Is(err, ErrCommitOutcomeUnknown):
		outcome = "commit-outcome-unknown"
	case errors.Is(err, ErrNoHost):
		outcome = "no-host"
	case errors.Is(err, ErrBudgetExhausted):
		outcome = "budget-exhausted"
	case err != nil:
		outcome = "failed"
	}
	span.SetAttributes(attribute.String("pgfailover.outcome", outcome))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (t *telemetry) survived(ctx context.Context) { t.survivedCount.Add(ctx, 1) }
func (t *telemetry) failed(ctx context.Context)   { t.failedCount.Add(ctx, 1) }

// logChange logs a host's change of state or role. Changes are rare, so
// they need no rate limit; a host failing the same way again logs nothing.
func (p *Pool) logChange(before, after hosthealth.HostStatus, err error) {
	if p.cfg.Logger == nil || (before.State == after.State && before.Role == after.Role) {
		return
	}
	attrs := []any{
		slog.String("host", after.Addr),
		slog.String("state", after.State.String()),
		slog.String("was", before.State.String()),
		slog.String("role", after.Role.String()),
	}
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	p.cfg.Logger.Log(context.Background(), level, "pgfailover: host changed", attrs...)
}
