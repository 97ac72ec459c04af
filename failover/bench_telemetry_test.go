package failover_test

import (
	"context"
	"fmt"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/internal/cpubench"
)

// BenchmarkQueryRowTelemetryCPU compares QueryRow("SELECT 1").Scan through
// two Pools on the same server: one on OpenTelemetry's default (no-op)
// providers (pool=noop) and one with the SDK's meter and tracer providers,
// a reader and a span processor installed (pool=sdk). A call that meets no
// failover event records nothing, so cpu-ratio should be 1:
//
//	go test -run '^$' -bench 'TelemetryCPU' -count 10 ./failover/ > tel.txt
//	benchstat -col /pool tel.txt
func BenchmarkQueryRowTelemetryCPU(b *testing.B) {
	ctx := context.Background()
	c := failovertest.Start(b, failovertest.Replicas(0))
	dsn := c.Primary().ConnString("pool_max_conns=4")
	plain, err := failover.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(plain.Close)
	cfg, err := failover.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(discardSpans{})))
	b.Cleanup(func() {
		meters.Shutdown(ctx)
		tracer.Shutdown(ctx)
	})
	cfg.MeterProvider, cfg.TracerProvider = meters, tracer
	observed, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(observed.Close)
	for _, g := range []int{1, parallelism} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			cpubench.CompareParallel(b, [2]cpubench.Side{
				{Name: "pool=noop", Op: func() error { return selectOne(plain) }},
				{Name: "pool=sdk", Op: func() error { return selectOne(observed) }},
			}, g)
		})
	}
}

// discardSpans is a span exporter that drops what it is given.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }
