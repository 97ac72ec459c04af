package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
// exporter writes the library's metrics.
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
	after := parse(`# TYPE pgfailover_host_state gauge
pgfailover_host_state{server_address="10.0.0.1",server_port="5432",pgfailover_state="transport-error",pgfailover_role="primary"} 1
pgfailover_host_state{server_address="::1",server_port="5433",pgfailover_state="healthy",pgfailover_role="primary"} 1
# TYPE pgfailover_failover_failed_total counter
pgfailover_failover_failed_total{pgfailover_outcome="commit_outcome_unknown"} 1
# TYPE pgfailover_probes_total counter
pgfailover_probes_total{server_address="10.0.0.1",server_port="5432",pgfailover_probe_outcome="ok"} 3
pgfailover_probes_total{server_address="10.0.0.1",server_port="5432",pgfailover_probe_outcome="transport"} 0
pgfailover_probes_total{server_address="::1",server_port="5433",pgfailover_probe_outcome="transport"} 1
# TYPE pgfailover_failover_duration_seconds histogram
pgfailover_failover_duration_seconds_bucket{server_address="10.0.0.1",server_port="5432",le="+Inf"} 1
pgfailover_failover_duration_seconds_sum{server_address="10.0.0.1",server_port="5432"} 0.4
pgfailover_failover_duration_seconds_count{server_address="10.0.0.1",server_port="5432"} 1
`)
	s := &scrapes{before: before, after: after, configured: []string{"10.0.0.1:5432", "[::1]:5433"}, old: "10.0.0.1:5432", promoted: "[::1]:5433"}
	host := []string{"pgfailover_host_state"}
	failover := []string{"pgfailover_failover_survived_total", "pgfailover_failover_failed_total"}
	duration := []string{"pgfailover_failover_duration_seconds"}
	probes := []string{"pgfailover_probes_total"}
	for _, c := range []struct {
		w        want
		families []string
		ok       bool
	}{
		{everyHost, host, true},
		{promotedIsPrimary, host, true},
		{moved, failover, true},
		{moved, failover[:1], false},
		{moved, duration, true},
		{namesOld, duration, true},
		{present, []string{"pgfailover_replica_staleness_seconds"}, false},
		{everyHost, probes, true},
		{oldProbesFailed, probes, false}, // a transport series at 0 is no failure
	} {
		if err := c.w.test(s, c.families); (err == nil) != c.ok {
			t.Errorf("%v %s: %v", c.families, c.w.what, err)
		}
	}
	s.old, s.promoted = s.promoted, s.old
	if oldProbesFailed.test(s, probes) != nil || promotedIsPrimary.test(s, host) == nil || namesOld.test(s, duration) == nil {
		t.Error("the checks did not follow the hosts' roles")
	}
	s.configured = append(s.configured, "10.0.0.3:5432")
	if everyHost.test(s, host) == nil {
		t.Error("a host without a series passed")
	}
}
