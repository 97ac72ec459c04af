package telemetry

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/replica"
)

// instrumentationName names the meter and tracer of this library.
const instrumentationName = "github.com/pgfailover/pgfailover"

// DBSystem is on every metric point and span: OpenTelemetry's name for
// the database, which database dashboards group by.
var DBSystem = attribute.String("db.system.name", "postgresql")

// Config says where a Pool's Instruments record.
type Config struct {
	MeterProvider  metric.MeterProvider // nil means the otel global provider
	TracerProvider trace.TracerProvider // nil means the otel global provider
	Clock          clock.Clock          // times connection opens; nil means the wall clock
	// Database is the database the Pool connects to, in each pool's
	// db.client.connection.pool.name.
	Database string
}

// Instruments holds a Pool's OpenTelemetry instruments. Nothing here runs
// on a call that meets no failover event, but for a read through the
// Reader, which counts itself in pgfailover.reads. The metric catalog in
// docs/observability.md lists every instrument; TestMetricCatalogIsComplete
// keeps it complete.
type Instruments struct {
	meter         metric.Meter
	tracer        trace.Tracer
	clock         clock.Clock
	database      string
	survivedCount metric.Int64Counter
	failedCount   metric.Int64Counter
	waitTime      metric.Float64Histogram
	callAttempts  metric.Int64Histogram
	duration      metric.Float64Histogram // pgfailover.failover.duration
	reads         metric.Int64Counter
	probes        metric.Int64Counter
	connAttempts  metric.Int64Counter
	connClosed    metric.Int64Counter
	connCreate    metric.Float64Histogram
	readAttrs     [2][replica.NumReasons][]metric.AddOption // by destination (replica, primary) and reason
	outcomes      [numOutcomes]attribute.Set                // pgfailover.outcome, with db.system.name
	system        attribute.Set                             // db.system.name alone
}

// CallOutcome is how a call that met a failover event ended: a value of
// pgfailover.outcome. The Pool decides it from the call's error.
type CallOutcome uint8

const (
	OutcomeSurvived             CallOutcome = iota // the call completed
	OutcomeCommitOutcomeUnknown                    // a COMMIT's outcome is unknown
	OutcomeNoHost                                  // no host could take the call
	OutcomeBudgetExhausted                         // failover_max_duration or the context ran out
	OutcomeFailed                                  // any other failure
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"survived", "commit_outcome_unknown", "no_host", "budget_exhausted", "failed"}

func (o CallOutcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// New creates a Pool's instruments on the providers of cfg.
func New(cfg Config) (*Instruments, error) {
	mp, tp := cfg.MeterProvider, cfg.TracerProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	m := mp.Meter(instrumentationName)
	t := &Instruments{meter: m, tracer: tp.Tracer(instrumentationName), clock: cfg.Clock, database: cfg.Database, system: attribute.NewSet(DBSystem)}
	if t.clock == nil {
		t.clock = clock.Real()
	}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string, bounds ...float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(bounds...))
		errs = append(errs, err)
		return h
	}
	t.survivedCount = counter("pgfailover.failover.survived", "{call}", "Calls that completed after at least one failover event.")
	t.failedCount = counter("pgfailover.failover.failed", "{call}", "Calls that met a failover event and could not complete safely, by outcome.")
	t.waitTime = seconds("pgfailover.failover.wait", "Time calls spent waiting for a host that could take them, per call that waited.", waitBuckets...)
	t.duration = seconds("pgfailover.failover.duration", "Time from the moment no host could take the Pool's calls to the moment one could again: how long the Pool had no usable host for its target.", waitBuckets...)
	t.reads = counter("pgfailover.reads", "{read}", "Reads the Reader sent, by destination (replica or primary) and reason (eligible, caught_up, waited, outage_sync, outage_async, pinned, lagging, unavailable).")
	t.probes = counter("pgfailover.probes", "{probe}", "Health probes sent to each host, by outcome: ok, or the class of the failure.")
	t.connAttempts = counter("pgfailover.connection.attempts", "{attempt}", "Connections the Pool's pools began to open to each host, by purpose.")
	t.connClosed = counter("pgfailover.connection.closed", "{connection}", "Connections the Pool closed, by host and reason (demoted, closed_by_server, wrong_role, not_promoted, silent_host, fallback_lifetime, removed, read_write, surplus).")
	t.connCreate = seconds("db.client.connection.create_time", "The time it took to open a connection, including the role check.", waitBuckets...)
	attempts, err := m.Int64Histogram("pgfailover.call.attempts",
		metric.WithDescription("Attempts (hosts tried) per call that met a failover event, by outcome."),
		metric.WithUnit("{attempt}"), metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 7, 10, 15, 20))
	errs = append(errs, err)
	t.callAttempts = attempts
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for o := range numOutcomes {
		t.outcomes[o] = attribute.NewSet(DBSystem, attribute.String("pgfailover.outcome", o.String()))
	}
	for d, dest := range []string{"replica", "primary"} {
		for r := range replica.NumReasons {
			// Built once: recording then allocates nothing.
			t.readAttrs[d][r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
				DBSystem,
				attribute.String("pgfailover.destination", dest),
				attribute.String("pgfailover.reason", replica.Reason(r).String()),
			))}
		}
	}
	return t, nil
}

// Meter is the meter the instruments were created on, for instruments of
// the Pool's parts that are created elsewhere.
func (t *Instruments) Meter() metric.Meter { return t.meter }

// waitBuckets are the bucket bounds, in seconds, of the histograms of
// failover times: from a few milliseconds (a promotion seen at once) to a
// minute (past failover_max_duration's default).
var waitBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// ReadRouted counts a read the Reader sent, to a replica or the primary.
func (t *Instruments) ReadRouted(ctx context.Context, reason replica.Reason) {
	dest := 1
	if reason.OnReplica() {
		dest = 0
	}
	t.reads.Add(ctx, 1, t.readAttrs[dest][reason]...)
}

// Waited records that a call waited d for a usable host.
func (t *Instruments) Waited(ctx context.Context, span trace.Span, d time.Duration) {
	t.waitTime.Record(ctx, d.Seconds(), metric.WithAttributeSet(t.system))
	span.AddEvent("waited for a usable host", trace.WithAttributes(attribute.Float64("pgfailover.wait_seconds", d.Seconds())))
}

// StartEpisode starts the span of one call's failover episode: from its
// first failover event to its outcome.
func (t *Instruments) StartEpisode(ctx context.Context) trace.Span {
	_, span := t.tracer.Start(ctx, "pgfailover.failover", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(DBSystem))
	return span
}

// HostFailed adds an event for one host, s, that failed during the
// episode.
func (t *Instruments) HostFailed(span trace.Span, s Server, class hosthealth.Class, err error) {
	span.AddEvent("host failed", trace.WithAttributes(
		s.address, s.port,
		attribute.String("pgfailover.class", class.String()),
		attribute.String("error.message", err.Error()),
	))
}

// EndEpisode ends the episode's span with the call's outcome (and err, its
// error), and records how many attempts the call made.
func (t *Instruments) EndEpisode(ctx context.Context, span trace.Span, attempts int, outcome CallOutcome, err error) {
	span.SetAttributes(attribute.String("pgfailover.outcome", outcome.String()))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	t.callAttempts.Record(ctx, int64(attempts), metric.WithAttributeSet(t.outcomes[outcome]))
}

// Counted records the outcome of a call that met a failover event.
func (t *Instruments) Counted(ctx context.Context, outcome CallOutcome) {
	if outcome == OutcomeSurvived {
		t.survivedCount.Add(ctx, 1, metric.WithAttributeSet(t.system))
		return
	}
	t.failedCount.Add(ctx, 1, metric.WithAttributeSet(t.outcomes[outcome]))
}

// FailoverEnded records how long the Pool's target had no usable host,
// against s, the host the calls were using when that began.
func (t *Instruments) FailoverEnded(s Server, d time.Duration) {
	t.duration.Record(context.Background(), d.Seconds(), metric.WithAttributeSet(s.set))
}
