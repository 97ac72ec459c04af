package failover_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// newMeter returns an SDK meter provider whose figures the test reads
// through a manual reader.
func newMeter(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { provider.Shutdown(context.Background()) })
	return reader, provider
}

// newMeteredPool is newPool with a meter provider the test can read.
func newMeteredPool(t *testing.T, ctx context.Context, dsn string) (*sdkmetric.ManualReader, *failover.Pool) {
	t.Helper()
	cfg, err := failover.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	reader, provider := newMeter(t)
	cfg.MeterProvider = provider
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return reader, pool
}

// collect returns every metric the reader collects now.
func collect(t *testing.T, ctx context.Context, r *sdkmetric.ManualReader) []metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var out []metricdata.Metrics
	for _, sm := range rm.ScopeMetrics {
		out = append(out, sm.Metrics...)
	}
	return out
}

// counters reads every int64 sum the reader has collected, by name.
func counters(t *testing.T, ctx context.Context, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, m := range collect(t, ctx, r) {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
			for _, dp := range sum.DataPoints {
				out[m.Name] += dp.Value
			}
		}
	}
	return out
}

// newObservedPool is newPool with a meter provider and a span recorder the
// test can read; each of opts may change the Config first.
func newObservedPool(t *testing.T, ctx context.Context, dsn string, opts ...func(*failover.Config)) (*sdkmetric.ManualReader, *tracetest.SpanRecorder, *failover.Pool) {
	t.Helper()
	cfg, err := failover.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(cfg)
	}
	reader, meters := newMeter(t)
	spans := tracetest.NewSpanRecorder()
	cfg.MeterProvider = meters
	cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return reader, spans, pool
}

func TestFailoverCounters(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	// Probes are effectively off, so only the calls below can notice the
	// failover and the counts are exact.
	reader, spans, pool := newObservedPool(t, ctx, c.ConnString("health_probe_interval=1h&failover_max_duration=3s"))

	if _, err := pool.Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
		t.Fatal(err)
	}
	if got := counters(t, ctx, reader); got["pgfailover.failover.survived"] != 0 || got["pgfailover.failover.failed"] != 0 {
		t.Fatalf("counters before any failover: %v", got)
	}

	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	// The primary dies and the replica is promoted: the next write finds
	// the old primary gone, walks on and succeeds. One survived call.
	if err := failoverTo(ctx, c, c.Nodes()[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatalf("write after promotion: %v", err)
	}
	got := counters(t, ctx, reader)
	if got["pgfailover.failover.survived"] != 1 || got["pgfailover.failover.failed"] != 0 {
		t.Fatalf("after one survived write: %v", got)
	}
	// One span for the episode, with an event naming the dead host.
	ended := spans.Ended()
	if len(ended) != 1 || ended[0].Name() != "pgfailover.failover" {
		t.Fatalf("spans after one failover: %v", ended)
	}
	if !spanHas(ended[0], "pgfailover.outcome", "survived") || !eventNames(ended[0], c.Nodes()[0].Addr()) {
		t.Errorf("span attributes %v, events %v", ended[0].Attributes(), ended[0].Events())
	}

	// Now every server is down: the next write fails over and cannot
	// complete. One failed call.
	if err := c.Nodes()[1].Crash(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO t VALUES (2)"); !errors.Is(err, failover.ErrBudgetExhausted) && !errors.Is(err, failover.ErrNoHost) {
		t.Fatalf("write with every server down: %v", err)
	}
	got = counters(t, ctx, reader)
	if got["pgfailover.failover.survived"] != 1 || got["pgfailover.failover.failed"] != 1 {
		t.Fatalf("after one failed write: %v", got)
	}
	if ended := spans.Ended(); len(ended) != 2 || ended[1].Status().Code != codes.Error {
		t.Fatalf("spans after a failed failover: %v", ended)
	}
}

func spanHas(s sdktrace.ReadOnlySpan, key, value string) bool {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key && kv.Value.AsString() == value {
			return true
		}
	}
	return false
}

// eventNames reports whether some event of s names host addr, in
// server.address and server.port.
func eventNames(s sdktrace.ReadOnlySpan, addr string) bool {
	for _, e := range s.Events() {
		if hostOf(attribute.NewSet(e.Attributes...)) == addr {
			return true
		}
	}
	return false
}

// hostOf is the host:port that a metric point's or event's server.address
// and server.port name, "" when they name none.
func hostOf(attrs attribute.Set) string {
	host, ok := attrs.Value("server.address")
	if !ok {
		return ""
	}
	port, ok := attrs.Value("server.port")
	if !ok {
		return host.AsString()
	}
	return net.JoinHostPort(host.AsString(), strconv.FormatInt(port.AsInt64(), 10))
}

// gauges reads every int64 gauge data point the reader has collected.
func gauges(t *testing.T, ctx context.Context, r *sdkmetric.ManualReader, name string) []metricdata.DataPoint[int64] {
	t.Helper()
	for _, m := range collect(t, ctx, r) {
		if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == name {
			return g.DataPoints
		}
	}
	return nil
}

// histogramCount is the number of values recorded in the float64 histogram
// name.
func histogramCount(t *testing.T, ctx context.Context, r *sdkmetric.ManualReader, name string) uint64 {
	t.Helper()
	var n uint64
	for _, m := range collect(t, ctx, r) {
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name {
			for _, dp := range h.DataPoints {
				n += dp.Count
			}
		}
	}
	return n
}

func TestHostGaugeAndWaitTelemetry(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	old, replica := c.Primary(), c.Replicas()[0]
	reader, spans, pool := newObservedPool(t, ctx, c.ConnString(""))

	states := map[string]string{}
	for _, dp := range gauges(t, ctx, reader, "pgfailover.host.state") {
		state, _ := dp.Attributes.Value("pgfailover.state")
		states[hostOf(dp.Attributes)] = state.AsString()
	}
	if states[old.Addr()] != "healthy" || states[replica.Addr()] != "topology-reject" || len(states) != 2 {
		t.Fatalf("host gauge: %v", states)
	}

	if _, err := pool.Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
		t.Fatal(err)
	}
	if err := old.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, "INSERT INTO t VALUES (1)")
		done <- err
	}()
	probes := func() int64 { return hostStat(t, pool, replica.Addr()).Probes }
	// The replica is probed every few milliseconds only while a call
	// waits: seeing that shows the write is waiting.
	start := probes()
	waitUntil(t, 30*time.Second, "fast probes while the write waits", func() bool { return probes() >= start+20 })
	if err := c.Promote(ctx, replica); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the write that waited for the promotion: %v", err)
	}
	if n := histogramCount(t, ctx, reader, "pgfailover.failover.wait"); n != 1 {
		t.Errorf("%d waits recorded, want 1", n)
	}
	var waited bool
	for _, s := range spans.Ended() {
		for _, e := range s.Events() {
			waited = waited || e.Name == "waited for a usable host"
		}
	}
	if !waited {
		t.Error("no span event for the wait")
	}
}
