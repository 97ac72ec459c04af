package main

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// catalog is the README's metric catalog as instruments: name, kind, unit
// and attribute keys. TestDashboard records one point of each through the
// exporter this program uses, to learn the Prometheus names and labels.
var catalog = []struct {
	name, kind, unit string
	attrs            []string
}{
	{"pgfailover.failover.survived", "counter", "{call}", []string{"db.system.name"}},
	{"pgfailover.failover.failed", "counter", "{call}", []string{"db.system.name", "pgfailover.outcome"}},
	{"pgfailover.failover.wait", "histogram", "s", []string{"db.system.name"}},
	{"pgfailover.failover.duration", "histogram", "s", []string{"db.system.name", "server.address", "server.port"}},
	{"pgfailover.call.attempts", "histogram", "{attempt}", []string{"db.system.name", "pgfailover.outcome"}},
	{"pgfailover.reads", "counter", "{read}", []string{"db.system.name", "pgfailover.destination", "pgfailover.reason"}},
	{"pgfailover.host.state", "gauge", "{host}", []string{"db.system.name", "server.address", "server.port", "pgfailover.state", "pgfailover.role"}},
	{"pgfailover.replica.staleness", "gauge", "s", []string{"db.system.name", "server.address", "server.port"}},
	{"pgfailover.probes", "counter", "{probe}", []string{"db.system.name", "server.address", "server.port", "pgfailover.probe.outcome"}},
	{"pgfailover.connection.attempts", "counter", "{attempt}", []string{"db.system.name", "server.address", "server.port", "pgfailover.outcome"}},
	{"pgfailover.connection.closed", "counter", "{connection}", []string{"db.system.name", "server.address", "server.port", "pgfailover.close.reason"}},
	{"db.client.connection.count", "updown", "{connection}", []string{"db.system.name", "db.client.connection.pool.name", "db.client.connection.state", "server.address", "server.port", "pgfailover.pool.purpose"}},
	{"db.client.connection.max", "updown", "{connection}", []string{"db.system.name", "db.client.connection.pool.name", "server.address", "server.port", "pgfailover.pool.purpose"}},
	{"db.client.connection.timeouts", "counter", "{timeout}", []string{"db.system.name", "db.client.connection.pool.name", "server.address", "server.port", "pgfailover.pool.purpose"}},
	{"db.client.connection.create_time", "histogram", "s", []string{"db.system.name", "db.client.connection.pool.name", "server.address", "server.port", "pgfailover.pool.purpose"}},
	{"pgfailover.pool.acquires", "counter", "{acquire}", []string{"db.system.name", "db.client.connection.pool.name", "server.address", "server.port", "pgfailover.pool.purpose", "pgfailover.acquire.waited"}},
	{"pgfailover.pool.acquire.wait_time", "fcounter", "s", []string{"db.system.name", "db.client.connection.pool.name", "server.address", "server.port", "pgfailover.pool.purpose"}},
	{"pgfailover.fallback.candidate_failures", "counter", "{failure}", nil},
	{"pgfailover.fallback.active", "gauge", "1", nil},
	{"pgfailover.fallback.host", "gauge", "{host}", nil},
	{"pgfailover.patroni.requests", "counter", "{request}", []string{"outcome"}},
	{"pgfailover.patroni.errors", "counter", "{request}", nil},
	{"pgfailover.patroni.duration", "histogram", "s", nil},
	{"pgfailover.patroni.hosts.discovered", "counter", "{host}", nil},
	{"pgfailover.patroni.hosts.removed", "counter", "{host}", nil},
	{"pgfailover.patroni.topology.changes", "counter", "{change}", []string{"pgfailover.change"}},
}

// exported records one point of every catalog instrument through the
// exporter, configured as run configures it, and returns the Prometheus
// series names (a histogram's _bucket, _sum and _count) with their labels.
func exported(t *testing.T) map[string][]string {
	t.Helper()
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	m := mp.Meter("catalog")
	ctx := context.Background()
	for _, c := range catalog {
		var kv []attribute.KeyValue
		for _, k := range c.attrs {
			if k == "server.port" {
				kv = append(kv, attribute.Int(k, 5432))
			} else {
				kv = append(kv, attribute.String(k, "x"))
			}
		}
		attrs := metric.WithAttributes(kv...)
		unit := metric.WithUnit(c.unit)
		switch c.kind {
		case "counter":
			i, err := m.Int64Counter(c.name, unit)
			if err != nil {
				t.Fatal(err)
			}
			i.Add(ctx, 1, attrs)
		case "fcounter":
			i, err := m.Float64Counter(c.name, unit)
			if err != nil {
				t.Fatal(err)
			}
			i.Add(ctx, 1, attrs)
		case "histogram":
			i, err := m.Float64Histogram(c.name, unit)
			if err != nil {
				t.Fatal(err)
			}
			i.Record(ctx, 1, attrs)
		case "gauge":
			i, err := m.Int64Gauge(c.name, unit)
			if err != nil {
				t.Fatal(err)
			}
			i.Record(ctx, 1, attrs)
		case "updown":
			i, err := m.Int64UpDownCounter(c.name, unit)
			if err != nil {
				t.Fatal(err)
			}
			i.Add(ctx, 1, attrs)
		default:
			t.Fatalf("kind %q", c.kind)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range families {
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		names := []string{f.GetName()}
		if f.GetType() == dto.MetricType_HISTOGRAM {
			names = []string{f.GetName() + "_bucket", f.GetName() + "_sum", f.GetName() + "_count"}
			labels = append(labels, "le")
		}
		for _, n := range names {
			out[n] = labels
		}
	}
	return out
}

var (
	seriesName = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{`)
	byLabels   = regexp.MustCompile(`by \(([^)]*)\)`)
)

// TestDashboard: dashboard.json parses, its panel ids are unique, and every
// query names series the exporter writes for the catalog, grouped by labels
// those series have.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title      string
		Templating struct {
			List []struct {
				Name       string
				Definition string
			}
		}
		Panels []struct {
			ID      int
			Title   string
			Type    string
			Targets []struct {
				Expr string
			}
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	series := exported(t)
	ids := map[int]bool{}
	queries := 0
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries++
			var labels []string
			names := seriesName.FindAllStringSubmatch(q.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: no series in %s", p.Title, q.Expr)
			}
			for _, n := range names {
				l, ok := series[n[1]]
				if !ok {
					t.Errorf("panel %q: %s is no series of the catalog", p.Title, n[1])
				}
				labels = append(labels, l...)
			}
			for _, by := range byLabels.FindAllStringSubmatch(q.Expr, -1) {
				for _, l := range strings.Split(by[1], ",") {
					if l = strings.TrimSpace(l); !slices.Contains(labels, l) {
						t.Errorf("panel %q: the series of %s have no label %s", p.Title, q.Expr, l)
					}
				}
			}
		}
	}
	if queries < 15 {
		t.Errorf("%d queries: the dashboard lost its panels", queries)
	}
	for _, v := range dash.Templating.List {
		if strings.HasPrefix(v.Definition, "label_values(") {
			if name := strings.TrimSuffix(strings.Fields(strings.TrimPrefix(v.Definition, "label_values("))[0], ","); series[name] == nil {
				t.Errorf("variable %s: %s is no series of the catalog", v.Name, name)
			}
		}
	}
}

// TestChecks runs the self-check's checks on exposition text as the
// library writes it: the catalog's server.address and server.port, and
// pgfailover.host before them.
func TestChecks(t *testing.T) {
	parse := func(text string) map[string]*dto.MetricFamily {
		t.Helper()
		p := expfmt.NewTextParser(model.UTF8Validation)
		f, err := p.TextToMetricFamilies(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	before := parse(`# TYPE pgfailover_failover_survived_total counter
pgfailover_failover_survived_total 0
`)
	for _, after := range []string{`# TYPE pgfailover_host_state gauge
pgfailover_host_state{server_address="10.0.0.1",server_port="5432",pgfailover_state="transport-error",pgfailover_role="primary"} 1
pgfailover_host_state{server_address="::1",server_port="5433",pgfailover_state="healthy",pgfailover_role="primary"} 1
# TYPE pgfailover_failover_failed_total counter
pgfailover_failover_failed_total{pgfailover_outcome="commit_outcome_unknown"} 1
`, `# TYPE pgfailover_host_state gauge
pgfailover_host_state{pgfailover_host="10.0.0.1:5432",pgfailover_state="transport-error",pgfailover_role="primary"} 1
pgfailover_host_state{pgfailover_host="[::1]:5433",pgfailover_state="healthy",pgfailover_role="primary"} 1
# TYPE pgfailover_failover_failed_total counter
pgfailover_failover_failed_total 1
`} {
		s := &scrapes{before: before, after: parse(after), configured: []string{"10.0.0.1:5432", "[::1]:5433"}, old: "10.0.0.1:5432", promoted: "[::1]:5433"}
		host := []string{"pgfailover_host_state"}
		failover := []string{"pgfailover_failover_survived_total", "pgfailover_failover_failed_total"}
		for _, c := range []struct {
			w        want
			families []string
			ok       bool
		}{
			{everyHost, host, true},
			{promotedIsPrimary, host, true},
			{moved, failover, true},
			{moved, failover[:1], false},
			{present, []string{"pgfailover_replica_staleness_seconds"}, false},
		} {
			if err := c.w.test(s, c.families); (err == nil) != c.ok {
				t.Errorf("%v %s: %v", c.families, c.w.what, err)
			}
		}
		s.configured = append(s.configured, "10.0.0.3:5432")
		if everyHost.test(s, host) == nil {
			t.Error("a host without a series passed")
		}
	}
}
