package failover

import (
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/pgfailover/pgfailover/internal/telemetry"
)

// What fallback.go records and logs through, under the names it calls.
// Everything else uses internal/telemetry's own; when fallback.go does
// too, poolTelemetry becomes *telemetry.Instruments, serverAttrs
// telemetry.Server, and this file goes.

// poolTelemetry is the Pool's instruments.
type poolTelemetry struct {
	*telemetry.Instruments
	meter metric.Meter // the Instruments' meter
}

func newPoolTelemetry(cfg telemetry.Config) (poolTelemetry, error) {
	t, err := telemetry.New(cfg)
	if err != nil {
		return poolTelemetry{}, err
	}
	return poolTelemetry{Instruments: t, meter: t.Meter()}, nil
}

// closed counts n connections of host h closed for reason.
func (t poolTelemetry) closed(h *hostPool, reason telemetry.CloseReason, n int) {
	t.Closed(h.server.Server, reason, n)
}

const closedFallbackLifetime = telemetry.ClosedFallbackLifetime

var dbSystem = telemetry.DBSystem

// serverAttrs is a host's attributes on metric points.
type serverAttrs struct{ telemetry.Server }

func (s serverAttrs) with(kv ...attribute.KeyValue) metric.MeasurementOption { return s.With(kv...) }
func (s serverAttrs) observe() metric.ObserveOption                          { return s.Observe() }

// logInfo logs msg at Info.
func (p *Pool) logInfo(msg string, attrs ...slog.Attr) { p.log.Info(msg, attrs...) }
