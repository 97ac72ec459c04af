package failover_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// point is one collected data point, flattened: its metric's name, its
// attributes and its value (a sum's or gauge's value, a histogram's count).
type point struct {
	name  string
	attrs attribute.Set
	value float64
}

// points collects every data point the reader has now.
func points(t *testing.T, ctx context.Context, r *sdkmetric.ManualReader) []point {
	t.Helper()
	var out []point
	for _, m := range collect(t, ctx, r) {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			out = valuePoints(out, m.Name, d.DataPoints)
		case metricdata.Sum[float64]:
			out = valuePoints(out, m.Name, d.DataPoints)
		case metricdata.Gauge[int64]:
			out = valuePoints(out, m.Name, d.DataPoints)
		case metricdata.Gauge[float64]:
			out = valuePoints(out, m.Name, d.DataPoints)
		case metricdata.Histogram[float64]:
			out = countPoints(out, m.Name, d.DataPoints)
		case metricdata.Histogram[int64]:
			out = countPoints(out, m.Name, d.DataPoints)
		}
	}
	return out
}

func valuePoints[N int64 | float64](out []point, name string, dps []metricdata.DataPoint[N]) []point {
	for _, dp := range dps {
		out = append(out, point{name, dp.Attributes, float64(dp.Value)})
	}
	return out
}

func countPoints[N int64 | float64](out []point, name string, dps []metricdata.HistogramDataPoint[N]) []point {
	for _, dp := range dps {
		out = append(out, point{name, dp.Attributes, float64(dp.Count)})
	}
	return out
}

// sum adds up the points of metric name whose attributes include every
// key=value of match ("host" matches host:port through hostOf).
func sum(ps []point, name string, match ...string) float64 {
	var total float64
next:
	for _, p := range ps {
		if p.name != name {
			continue
		}
		for i := 0; i+1 < len(match); i += 2 {
			key, want := match[i], match[i+1]
			var got string
			if key == "host" {
				got = hostOf(p.attrs)
			} else if v, ok := p.attrs.Value(attribute.Key(key)); ok {
				got = v.String()
			}
			if got != want {
				continue next
			}
		}
		total += p.value
	}
	return total
}

// hostStates is each host's pgfailover.host.state point: "state/role".
func hostStates(ps []point) map[string]string {
	out := map[string]string{}
	for _, p := range ps {
		if p.name != "pgfailover.host.state" {
			continue
		}
		state, _ := p.attrs.Value("pgfailover.state")
		role, _ := p.attrs.Value("pgfailover.role")
		out[hostOf(p.attrs)] = state.AsString() + "/" + role.AsString()
	}
	return out
}

// logLines returns the recorded lines that start with msg and contain
// every one of has.
func logLines(h *recordingHandler, msg string, has ...string) []string {
	var out []string
next:
	for _, r := range h.since(time.Time{}) {
		if !strings.HasPrefix(r.text, msg+" ") && r.text != msg {
			continue
		}
		for _, s := range has {
			if !strings.Contains(r.text, s) {
				continue next
			}
		}
		out = append(out, r.text)
	}
	return out
}

func TestTelemetryKillAndPromote(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	old, replica := c.Primary(), c.Replicas()[0]
	logs := &recordingHandler{}
	reader, spans, pool := newObservedPool(t, ctx, c.ConnString(""), func(cfg *failover.Config) { cfg.Logger = slog.New(logs) })
	if _, err := pool.Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
		t.Fatal(err)
	}

	before := points(t, ctx, reader)
	if got, want := hostStates(before), map[string]string{old.Addr(): "healthy/primary", replica.Addr(): "topology-reject/replica"}; !equalMaps(got, want) {
		t.Fatalf("host states before: %v, want %v", got, want)
	}
	for _, p := range before {
		if v, ok := p.attrs.Value("db.system.name"); !ok || v.AsString() != "postgresql" {
			t.Errorf("%s point without db.system.name=postgresql: %v", p.name, p.attrs.ToSlice())
		}
	}
	if n := sum(before, "db.client.connection.count", "host", old.Addr(), "pgfailover.pool.purpose", "calls"); n < 1 {
		t.Errorf("the primary's pool reports %v connections, want at least the one the CREATE used", n)
	}
	if n := sum(before, "pgfailover.connection.attempts", "host", old.Addr(), "pgfailover.pool.purpose", "calls"); n < 1 {
		t.Errorf("%v connection attempts to the primary recorded", n)
	}
	if n := sum(before, "db.client.connection.create_time", "host", old.Addr()); n < 1 {
		t.Errorf("%v connection create times recorded", n)
	}
	if n := sum(before, "pgfailover.failover.survived") + sum(before, "pgfailover.failover.failed") + sum(before, "pgfailover.failover.duration"); n != 0 {
		t.Errorf("failover figures before any failover: %v", n)
	}
	okProbes := func() float64 {
		return sum(points(t, ctx, reader), "pgfailover.probes", "host", replica.Addr(), "pgfailover.probe.outcome", "ok")
	}
	probesBefore := okProbes()

	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, "INSERT INTO t VALUES (1)")
		done <- err
	}()
	// The replica is probed fast while the write waits.
	waitUntil(t, 30*time.Second, "probes of the replica while the write waits", func() bool { return okProbes() >= probesBefore+5 })
	if err := c.Promote(ctx, replica); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the write across the promotion: %v", err)
	}
	waitUntil(t, 10*time.Second, "the new primary's state", func() bool {
		return hostStates(points(t, ctx, reader))[replica.Addr()] == "healthy/primary"
	})

	after := points(t, ctx, reader)
	if got := hostStates(after)[old.Addr()]; got != "transport-error/primary" {
		t.Errorf("old primary's state after: %s", got)
	}
	checks := []struct {
		what string
		got  float64
		want float64
	}{
		{"survived", sum(after, "pgfailover.failover.survived"), 1},
		{"failed", sum(after, "pgfailover.failover.failed"), 0},
		{"attempts histogram, survived", sum(after, "pgfailover.call.attempts", "pgfailover.outcome", "survived"), 1},
		{"failover durations, old primary", sum(after, "pgfailover.failover.duration", "host", old.Addr()), 1},
		{"failover durations in all", sum(after, "pgfailover.failover.duration"), 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if n := sum(after, "pgfailover.probes", "host", old.Addr(), "pgfailover.probe.outcome", "transport"); n < 1 {
		t.Errorf("%v failed probes of the dead primary counted", n)
	}
	ended := spans.Ended()
	if len(ended) != 1 || !spanHas(ended[0], "pgfailover.outcome", "survived") || !spanHas(ended[0], "db.system.name", "postgresql") {
		t.Errorf("spans: %v", ended)
	}

	// Each change is logged once, whoever noticed it.
	if got := logLines(logs, "pgfailover: host changed", "host="+old.Addr(), "was=healthy"); len(got) != 1 {
		t.Errorf("the old primary going down logged %d times: %q", len(got), got)
	}
	if got := logLines(logs, "pgfailover: host changed", "host="+replica.Addr(), "role=primary", "role_was=replica"); len(got) != 1 {
		t.Errorf("the promotion logged %d times: %q", len(got), got)
	}
	if got := logLines(logs, "pgfailover: failover ended", "failed="+old.Addr(), "host="+replica.Addr()); len(got) != 1 {
		t.Errorf("end of the failover logged %d times: %q", len(got), got)
	}
}

func TestTelemetrySwitchover(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	old, replica := c.Primary(), c.Replicas()[0]
	reader, _, pool := newObservedPool(t, ctx, c.ConnString(""))
	if _, err := pool.Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
		t.Fatal(err)
	}
	// A few idle connections on the primary, for the switchover to end.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { pool.Exec(ctx, "SELECT pg_sleep(0.05)") })
	}
	wg.Wait()
	held := hostStat(t, pool, old.Addr()).Pool.TotalConns()

	if _, err := c.Switchover(ctx, replica); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "a write on the new primary", func() bool {
		_, err := pool.Exec(ctx, "INSERT INTO t VALUES (1)")
		return err == nil
	})
	want := map[string]string{old.Addr(): "topology-reject/replica", replica.Addr(): "healthy/primary"}
	waitUntil(t, 30*time.Second, "both hosts in their new roles", func() bool {
		return equalMaps(hostStates(points(t, ctx, reader)), want)
	})

	ps := points(t, ctx, reader)
	// PostgreSQL restarts the old primary to make it a standby, so its
	// sessions end there; the Pool counts each connection it let go once,
	// by what it saw first. Once back as a standby, the old primary may
	// have been the likeliest to be promoted while the writes waited: the
	// connections opened there for that are closed when the wait ends.
	var closed float64
	for _, reason := range []string{"closed_by_server", "silent_host", "demoted", "not_promoted"} {
		n := sum(ps, "pgfailover.connection.closed", "host", old.Addr(), "pgfailover.close.reason", reason)
		t.Logf("connections to the old primary closed, %s: %v", reason, n)
		closed += n
	}
	if all := sum(ps, "pgfailover.connection.closed", "host", old.Addr()); all != closed || closed < float64(held) {
		t.Errorf("connections to the old primary closed: %v (%v with the expected reasons), want at least the %d it held", all, closed, held)
	}
	if n := sum(ps, "pgfailover.failover.failed"); n != 0 {
		t.Errorf("%v calls failed", n)
	}
	if n := sum(ps, "pgfailover.failover.duration", "host", old.Addr()); n < 1 {
		t.Errorf("no failover duration recorded for the old primary")
	}
	if n := sum(ps, "pgfailover.probes", "host", replica.Addr(), "pgfailover.probe.outcome", "ok"); n < 2 {
		t.Errorf("%v probes of the new primary counted", n)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
