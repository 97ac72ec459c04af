package failover

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// instrumentationName names the meter and tracer of this library.
const instrumentationName = "github.com/pgfailover/pgfailover"

// telemetry holds the Pool's OpenTelemetry instruments.
type telemetry struct {
	survivedCount metric.Int64Counter
	failedCount   metric.Int64Counter
}

func newTelemetry(mp metric.MeterProvider) (*telemetry, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
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
	return &telemetry{survivedCount: survived, failedCount: failed}, nil
}

func (t *telemetry) survived(ctx context.Context) { t.survivedCount.Add(ctx, 1) }
func (t *telemetry) failed(ctx context.Context)   { t.failedCount.Add(ctx, 1) }

// logChange logs a host's change of state or role. Changes are rare, so
// they need no rate limit; a host failing the same way again logs nothing.
func (p *Pool) logChange(before, after hosthealth.HostStatus, err error) {
	if p.logger == nil || (before.State == after.State && before.Role == after.Role) {
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
	p.logger.Log(context.Background(), level, "pgfailover: host changed", attrs...)
}
