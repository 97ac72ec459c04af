package patroni

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// instrumentationName names the meter of this package.
const instrumentationName = "github.com/pgfailover/pgfailover/patroni"

// meter returns the package's meter from mp, or a no-op one when mp is nil.
func meter(mp metric.MeterProvider) metric.Meter {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	return mp.Meter(instrumentationName)
}

// The outcome attribute of pgfailover.patroni.requests: two values only,
// so the series count stays fixed whatever the URLs.
var (
	outcomeOK    = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "ok")))
	outcomeError = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "error")))
)

// clientTelemetry holds the Client's instruments.
type clientTelemetry struct {
	requests metric.Int64Counter
	errors   metric.Int64Counter
	duration metric.Float64Histogram
}

func newClientTelemetry(mp metric.MeterProvider) (clientTelemetry, error) {
	m := meter(mp)
	var t clientTelemetry
	var err error
	if t.requests, err = m.Int64Counter("pgfailover.patroni.requests",
		metric.WithDescription("Requests sent to a Patroni REST API, by outcome."),
		metric.WithUnit("{request}")); err != nil {
		return t, err
	}
	if t.errors, err = m.Int64Counter("pgfailover.patroni.errors",
		metric.WithDescription("Requests to a Patroni REST API that gave no usable answer."),
		metric.WithUnit("{request}")); err != nil {
		return t, err
	}
	t.duration, err = m.Float64Histogram("pgfailover.patroni.duration",
		metric.WithDescription("Time from sending a request to a Patroni REST API to its decoded answer or failure."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...))
	return t, err
}

// durationBuckets are the boundaries of pgfailover.patroni.duration, in
// seconds: an answer on the local network takes milliseconds, and a
// request ends by DefaultTimeout (5 s). The SDK's default boundaries (0 to
// 10000) suit milliseconds.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// record counts one request to one URL.
func (t clientTelemetry) record(ctx context.Context, d time.Duration, err error) {
	// The round's context may be cancelled by now; the SDK must record anyway.
	ctx = context.WithoutCancel(ctx)
	outcome := outcomeOK
	if err != nil {
		outcome = outcomeError
		t.errors.Add(ctx, 1)
	}
	t.requests.Add(ctx, 1, outcome)
	t.duration.Record(ctx, d.Seconds())
}

// The change attribute of pgfailover.patroni.topology.changes.
var (
	changeLeader  = metric.WithAttributeSet(attribute.NewSet(attribute.String("pgfailover.change", "leader")))
	changeMembers = metric.WithAttributeSet(attribute.NewSet(attribute.String("pgfailover.change", "members")))
)

// sourceTelemetry holds the Source's instruments.
type sourceTelemetry struct {
	discovered metric.Int64Counter
	removed    metric.Int64Counter
	changes    metric.Int64Counter
}

func newSourceTelemetry(mp metric.MeterProvider) (sourceTelemetry, error) {
	m := meter(mp)
	var t sourceTelemetry
	var err error
	if t.discovered, err = m.Int64Counter("pgfailover.patroni.hosts.discovered",
		metric.WithDescription("Hosts that appeared in the Patroni topology."),
		metric.WithUnit("{host}")); err != nil {
		return t, err
	}
	if t.removed, err = m.Int64Counter("pgfailover.patroni.hosts.removed",
		metric.WithDescription("Hosts that left the Patroni topology."),
		metric.WithUnit("{host}")); err != nil {
		return t, err
	}
	t.changes, err = m.Int64Counter("pgfailover.patroni.topology.changes",
		metric.WithDescription("Answers of a Patroni REST API that named another leader than the one named before (pgfailover.change=leader), or another set of members (members)."),
		metric.WithUnit("{change}"))
	return t, err
}
