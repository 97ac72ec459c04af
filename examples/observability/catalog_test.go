package main

import (
	"context"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/pgfailover/pgfailover/failover"
)

// instrument is one row of the metric catalog (docs/observability.md).
type instrument struct {
	name, kind, unit string
	attrs            []string
	// series and labels are the row's Prometheus column: the series names
	// (a histogram's _bucket, _sum and _count) and the label names in
	// braces, "pool labels" spelled out.
	series, labels []string
}

// poolAttributes are what the catalog calls "pool attributes".
var poolAttributes = []string{"db.client.connection.pool.name", "pgfailover.pool.purpose", "server.address", "server.port"}

var (
	backticked    = regexp.MustCompile("`([^`]*)`")
	parenthesized = regexp.MustCompile(`\([^)]*\)`)
	poolLabels    = regexp.MustCompile(`the pool labels ([^.]*)\.`)
)

// catalogSection returns the metric catalog's section of
// docs/observability.md.
func catalogSection(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "## Metric catalog\n")
	if !ok {
		t.Fatal("docs/observability.md has no metric catalog")
	}
	section, _, _ = strings.Cut(section, "\n#")
	return section
}

// catalog reads the metric catalog from docs/observability.md: each
// row's name, Prometheus series and labels, instrument, unit and
// attribute keys (the values some cells give in parentheses left out),
// with db.system.name on every point of the failover package.
func catalog(t *testing.T) []instrument {
	t.Helper()
	section := catalogSection(t)
	var pool []string
	if m := poolLabels.FindStringSubmatch(section); m != nil {
		for _, l := range backticked.FindAllStringSubmatch(m[1], -1) {
			pool = append(pool, l[1])
		}
	}
	if len(pool) != len(poolAttributes) {
		t.Fatalf("the metric catalog names %d pool labels (%v), want %d", len(pool), pool, len(poolAttributes))
	}
	var out []instrument
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 7 {
			t.Fatalf("catalog row %q", line)
		}
		in := instrument{
			name: strings.Trim(strings.TrimSpace(cells[1]), "`"),
			kind: strings.TrimSpace(cells[3]),
			unit: strings.Trim(strings.TrimSpace(cells[4]), "`"),
		}
		names, labels, _ := strings.Cut(cells[2], "{")
		for i, m := range backticked.FindAllStringSubmatch(names, -1) {
			if i > 0 && strings.HasPrefix(m[1], "_") {
				// `x_bucket`, `_sum`, `_count`
				m[1] = strings.TrimSuffix(in.series[0], "_bucket") + m[1]
			}
			in.series = append(in.series, m[1])
		}
		if labels, ok := strings.CutSuffix(strings.TrimSpace(labels), "}"); ok {
			for _, l := range strings.Split(labels, ",") {
				if l = strings.TrimSpace(l); l == "pool labels" {
					in.labels = append(in.labels, pool...)
				} else {
					in.labels = append(in.labels, strings.Trim(l, "`"))
				}
			}
		}
		if !strings.HasPrefix(in.name, "pgfailover.patroni.") {
			in.attrs = append(in.attrs, "db.system.name")
		}
		keys := parenthesized.ReplaceAllString(cells[5], "")
		if strings.Contains(keys, "pool attributes") {
			in.attrs = append(in.attrs, poolAttributes...)
		}
		for _, m := range backticked.FindAllStringSubmatch(keys, -1) {
			in.attrs = append(in.attrs, m[1])
		}
		out = append(out, in)
	}
	if len(out) < 20 {
		t.Fatalf("read %d rows of the metric catalog", len(out))
	}
	return out
}

// created is an instrument as the library creates it.
type created struct{ kind, unit string }

// libraryInstruments builds a Pool that reaches for no server (lazy_connect,
// with the Patroni source and the local-first fallback, whose instruments
// are the Pool's too) on a MeterProvider that notes every instrument
// created, closes it, and returns them by name: the catalog's
// instruments as the code defines them, with the catalog's words for
// their kinds.
func libraryInstruments(t *testing.T) map[string]created {
	t.Helper()
	seen := map[string]created{}
	// Port 1 on loopback refuses at once: the probes and the source's
	// requests in the Pool's short life fail without waiting.
	cfg, err := failover.ParseConfig("postgres://app:secret@127.0.0.1:1/app?lazy_connect=on&fallback_local=on&patroni_api_urls=http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MeterProvider = notingProvider{seen: seen}
	pool, err := failover.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	if len(seen) < 20 {
		t.Fatalf("the library created %d instruments", len(seen))
	}
	return seen
}

// notingProvider is a MeterProvider whose meters note each instrument
// created on them and record nothing. The Pool creates its instruments
// while NewWithConfig runs, one goroutine, and so the map needs no lock.
type notingProvider struct {
	noop.MeterProvider
	seen map[string]created
}

func (p notingProvider) Meter(string, ...metric.MeterOption) metric.Meter {
	return notingMeter{seen: p.seen}
}

type notingMeter struct {
	noop.Meter
	seen map[string]created
}

func (m notingMeter) Int64Counter(name string, o ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	m.seen[name] = created{"counter", metric.NewInt64CounterConfig(o...).Unit()}
	return m.Meter.Int64Counter(name, o...)
}

func (m notingMeter) Float64Counter(name string, o ...metric.Float64CounterOption) (metric.Float64Counter, error) {
	m.seen[name] = created{"counter", metric.NewFloat64CounterConfig(o...).Unit()}
	return m.Meter.Float64Counter(name, o...)
}

func (m notingMeter) Int64UpDownCounter(name string, o ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	m.seen[name] = created{"up-down counter", metric.NewInt64UpDownCounterConfig(o...).Unit()}
	return m.Meter.Int64UpDownCounter(name, o...)
}

func (m notingMeter) Float64UpDownCounter(name string, o ...metric.Float64UpDownCounterOption) (metric.Float64UpDownCounter, error) {
	m.seen[name] = created{"up-down counter", metric.NewFloat64UpDownCounterConfig(o...).Unit()}
	return m.Meter.Float64UpDownCounter(name, o...)
}

func (m notingMeter) Int64Histogram(name string, o ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	m.seen[name] = created{"histogram", metric.NewInt64HistogramConfig(o...).Unit()}
	return m.Meter.Int64Histogram(name, o...)
}

func (m notingMeter) Float64Histogram(name string, o ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	m.seen[name] = created{"histogram", metric.NewFloat64HistogramConfig(o...).Unit()}
	return m.Meter.Float64Histogram(name, o...)
}

func (m notingMeter) Int64Gauge(name string, o ...metric.Int64GaugeOption) (metric.Int64Gauge, error) {
	m.seen[name] = created{"gauge", metric.NewInt64GaugeConfig(o...).Unit()}
	return m.Meter.Int64Gauge(name, o...)
}

func (m notingMeter) Float64Gauge(name string, o ...metric.Float64GaugeOption) (metric.Float64Gauge, error) {
	m.seen[name] = created{"gauge", metric.NewFloat64GaugeConfig(o...).Unit()}
	return m.Meter.Float64Gauge(name, o...)
}

func (m notingMeter) Int64ObservableCounter(name string, o ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	m.seen[name] = created{"counter", metric.NewInt64ObservableCounterConfig(o...).Unit()}
	return m.Meter.Int64ObservableCounter(name, o...)
}

func (m notingMeter) Float64ObservableCounter(name string, o ...metric.Float64ObservableCounterOption) (metric.Float64ObservableCounter, error) {
	m.seen[name] = created{"counter", metric.NewFloat64ObservableCounterConfig(o...).Unit()}
	return m.Meter.Float64ObservableCounter(name, o...)
}

func (m notingMeter) Int64ObservableUpDownCounter(name string, o ...metric.Int64ObservableUpDownCounterOption) (metric.Int64ObservableUpDownCounter, error) {
	m.seen[name] = created{"up-down counter", metric.NewInt64ObservableUpDownCounterConfig(o...).Unit()}
	return m.Meter.Int64ObservableUpDownCounter(name, o...)
}

func (m notingMeter) Float64ObservableUpDownCounter(name string, o ...metric.Float64ObservableUpDownCounterOption) (metric.Float64ObservableUpDownCounter, error) {
	m.seen[name] = created{"up-down counter", metric.NewFloat64ObservableUpDownCounterConfig(o...).Unit()}
	return m.Meter.Float64ObservableUpDownCounter(name, o...)
}

func (m notingMeter) Int64ObservableGauge(name string, o ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	m.seen[name] = created{"gauge", metric.NewInt64ObservableGaugeConfig(o...).Unit()}
	return m.Meter.Int64ObservableGauge(name, o...)
}

func (m notingMeter) Float64ObservableGauge(name string, o ...metric.Float64ObservableGaugeOption) (metric.Float64ObservableGauge, error) {
	m.seen[name] = created{"gauge", metric.NewFloat64ObservableGaugeConfig(o...).Unit()}
	return m.Meter.Float64ObservableGauge(name, o...)
}

// scrape records one point of every instrument of the catalog, of the
// kind and unit the library creates it with and with the catalog's
// attributes, through the exporter and handler run serves, scrapes that
// handler, and returns the metric families by instrument name.
func scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	lib := libraryInstruments(t)
	exporter, handler, err := newMetrics()
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	m := mp.Meter("catalog")
	ctx := context.Background()
	for _, c := range catalog(t) {
		code, ok := lib[c.name]
		if !ok {
			t.Errorf("the metric catalog lists %s, which the library does not create", c.name)
			continue
		}
		var kv []attribute.KeyValue
		for _, k := range c.attrs {
			if k == "server.port" {
				kv = append(kv, attribute.Int(k, 5432))
			} else {
				kv = append(kv, attribute.String(k, "x"))
			}
		}
		// The description is the name: the family's HELP then says which
		// instrument it is.
		attrs, desc, unit := metric.WithAttributes(kv...), metric.WithDescription(c.name), metric.WithUnit(code.unit)
		switch code.kind {
		case "counter":
			i, err := m.Float64Counter(c.name, desc, unit)
			if err != nil {
				t.Fatal(err)
			}
			i.Add(ctx, 1, attrs)
		case "up-down counter":
			i, err := m.Int64UpDownCounter(c.name, desc, unit)
			if err != nil {
				t.Fatal(err)
			}
			i.Add(ctx, 1, attrs)
		case "histogram":
			i, err := m.Float64Histogram(c.name, desc, unit)
			if err != nil {
				t.Fatal(err)
			}
			i.Record(ctx, 1, attrs)
		case "gauge":
			i, err := m.Float64Gauge(c.name, desc, unit)
			if err != nil {
				t.Fatal(err)
			}
			i.Record(ctx, 1, attrs)
		}
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range families {
		if f.GetHelp() != "" && len(f.GetMetric()) > 0 {
			out[f.GetHelp()] = f
		}
	}
	return out
}

// seriesOf returns the series names of family f: a histogram's _bucket,
// _sum and _count, else its own name.
func seriesOf(f *dto.MetricFamily) []string {
	if f.GetType() == dto.MetricType_HISTOGRAM {
		return []string{f.GetName() + "_bucket", f.GetName() + "_sum", f.GetName() + "_count"}
	}
	return []string{f.GetName()}
}

// labelsOf returns the label names of f's first series, sorted.
func labelsOf(f *dto.MetricFamily) []string {
	var out []string
	for _, l := range f.GetMetric()[0].GetLabel() {
		out = append(out, l.GetName())
	}
	slices.Sort(out)
	return out
}

// exported returns the Prometheus series names the exporter writes for
// the catalog (a histogram's _bucket, _sum and _count), each with its
// label names (le on _bucket).
func exported(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, f := range scrape(t) {
		labels := labelsOf(f)
		for _, s := range seriesOf(f) {
			if strings.HasSuffix(s, "_bucket") && f.GetType() == dto.MetricType_HISTOGRAM {
				out[s] = append(slices.Clip(labels), "le")
			} else {
				out[s] = labels
			}
		}
	}
	return out
}

// implicitLabels are on series without being in the catalog's braces:
// the exporter's scope labels and db_system_name, which the catalog's
// text names once.
var implicitLabels = []string{"db_system_name", "otel_scope_name", "otel_scope_schema_url", "otel_scope_version"}

// TestPrometheusNames keeps the catalog's Prometheus column true: every
// row's instrument and unit are those the library creates it with, and
// its series and labels are those a scrape of /metrics shows for it. It
// also checks that the self-check's families are the catalog's.
func TestPrometheusNames(t *testing.T) {
	lib := libraryInstruments(t)
	families := scrape(t)
	rows := catalog(t)
	listed := map[string]bool{}
	for _, row := range rows {
		listed[row.name] = true
		code, ok := lib[row.name]
		if !ok {
			continue // scrape reported it
		}
		if row.kind != code.kind || row.unit != code.unit {
			t.Errorf("%s: the catalog says %s in %q, the library creates a %s in %q", row.name, row.kind, row.unit, code.kind, code.unit)
		}
		f, ok := families[row.name]
		if !ok {
			t.Errorf("%s: not on /metrics", row.name)
			continue
		}
		if want := seriesOf(f); !slices.Equal(row.series, want) {
			t.Errorf("%s: the catalog says Prometheus shows %v, /metrics has %v", row.name, row.series, want)
		}
		want := slices.DeleteFunc(labelsOf(f), func(l string) bool { return slices.Contains(implicitLabels, l) })
		got := slices.Sorted(slices.Values(row.labels))
		if !slices.Equal(got, want) {
			t.Errorf("%s: the catalog says the labels are %v, /metrics has %v", row.name, got, want)
		}
	}
	for name := range lib {
		if !listed[name] {
			t.Errorf("the library creates %s, which the metric catalog does not list", name)
		}
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for _, c := range metricChecks {
		for _, f := range c.families {
			if !names[f] {
				t.Errorf("the self-check looks for %s, which is no family of the catalog", f)
			}
		}
	}
}
