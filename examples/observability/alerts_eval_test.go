package main

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// history is an hour of scrapes of one application, 15 s apart: each
// series by its labels, its value at each second of the hour.
type history map[string]series

type series struct {
	lset  labels.Labels
	value func(sec float64) float64
}

const hour = 3600.0

// set adds (or replaces) the series of metric name with labels kv, as
// scraped from one application.
func (h history) set(value func(float64) float64, name string, kv ...string) {
	lset := seriesLabels(name, kv)
	h[lset.String()] = series{lset, value}
}

// del removes the series of metric name with labels kv.
func (h history) del(name string, kv ...string) { delete(h, seriesLabels(name, kv).String()) }

func seriesLabels(name string, kv []string) labels.Labels {
	m := map[string]string{model.MetricNameLabel: name, "job": "app", "instance": "app-1:9464"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return labels.FromMap(m)
}

func constant(v float64) func(float64) float64 { return func(float64) float64 { return v } }

// perSecond is a counter that rises by r a second.
func perSecond(r float64) func(float64) float64 { return func(s float64) float64 { return r * s } }

// at is a counter that rose by one at each of the seconds given.
func at(secs ...float64) func(float64) float64 {
	return func(s float64) float64 {
		n := 0.0
		for _, t := range secs {
			if s >= t {
				n++
			}
		}
		return n
	}
}

// until is f up to second t, and then stays where it was.
func until(t float64, f func(float64) float64) func(float64) float64 {
	return func(s float64) float64 { return f(min(s, t)) }
}

var (
	db1 = []string{"server_address", "db-1", "server_port", "5432"}
	db2 = []string{"server_address", "db-2", "server_port", "5432"}
)

func with(kv []string, more ...string) []string { return append(slices.Clip(kv), more...) }

// healthy is an hour with nothing wrong: db-1 the primary, db-2 a replica
// in the Reader's use, the Patroni API answering, no failover.
func healthy() history {
	h := history{}
	h.set(constant(1), "pgfailover_host_state", with(db1, "pgfailover_state", "healthy", "pgfailover_role", "primary")...)
	h.set(constant(1), "pgfailover_host_state", with(db2, "pgfailover_state", "topology-reject", "pgfailover_role", "replica")...)
	for _, o := range []string{"commit_outcome_unknown", "no_host", "budget_exhausted", "failed"} {
		h.set(constant(0), "pgfailover_failover_failed_total", "pgfailover_outcome", o)
	}
	h.set(constant(0), "pgfailover_failover_duration_seconds_count", db1...)
	for _, le := range []string{"1", "5", "10", "30", "+Inf"} {
		h.set(constant(0), "pgfailover_failover_wait_seconds_bucket", "le", le)
	}
	h.set(perSecond(1), "pgfailover_probes_total", with(db1, "pgfailover_probe_outcome", "ok")...)
	h.set(perSecond(1), "pgfailover_probes_total", with(db2, "pgfailover_probe_outcome", "ok")...)
	h.set(constant(0), "pgfailover_probes_total", with(db2, "pgfailover_probe_outcome", "transport")...)
	h.set(constant(0.2), "pgfailover_replica_staleness_seconds", db2...)
	h.set(perSecond(5), "pgfailover_reads_total", "pgfailover_destination", "replica", "pgfailover_reason", "eligible")
	h.set(perSecond(0.1), "pgfailover_reads_total", "pgfailover_destination", "primary", "pgfailover_reason", "pinned")
	h.set(perSecond(1.0/3), "pgfailover_patroni_requests_total", "outcome", "ok")
	h.set(constant(0), "pgfailover_patroni_requests_total", "outcome", "error")
	h.set(constant(0), "pgfailover_fallback_active_ratio")
	h.set(constant(0), "db_client_connection_timeouts_total", "db_client_connection_pool_name", "db-1:5432/app/calls")
	return h
}

// troubles gives each alert of alerts.yml an hour that must fire it:
// healthy, changed as the function says.
var troubles = map[string]func(h history){
	"PgfailoverNoUsablePrimary": func(h history) {
		// The exporter shows a host's state now, one series per host.
		h.del("pgfailover_host_state", with(db1, "pgfailover_state", "healthy", "pgfailover_role", "primary")...)
		h.set(constant(1), "pgfailover_host_state", with(db1, "pgfailover_state", "transport-error", "pgfailover_role", "primary")...)
	},
	"PgfailoverCallsFailedWithoutHost": func(h history) {
		h.set(at(hour-100, hour-90), "pgfailover_failover_failed_total", "pgfailover_outcome", "budget_exhausted")
	},
	"PgfailoverCommitOutcomeUnknown": func(h history) {
		h.set(at(hour-200), "pgfailover_failover_failed_total", "pgfailover_outcome", "commit_outcome_unknown")
	},
	"PgfailoverFailover": func(h history) {
		h.set(at(hour-100), "pgfailover_failover_duration_seconds_count", db1...)
	},
	"PgfailoverRepeatedFailovers": func(h history) {
		h.set(at(hour-3000, hour-2000, hour-1000), "pgfailover_failover_duration_seconds_count", db1...)
	},
	"PgfailoverCallsWaitedLong": func(h history) {
		for _, le := range []string{"30", "+Inf"} {
			h.set(at(hour-300, hour-200, hour-100), "pgfailover_failover_wait_seconds_bucket", "le", le)
		}
	},
	"PgfailoverHostProbesFailing": func(h history) {
		h.set(until(hour-600, perSecond(1)), "pgfailover_probes_total", with(db2, "pgfailover_probe_outcome", "ok")...)
		h.set(perSecond(0.5), "pgfailover_probes_total", with(db2, "pgfailover_probe_outcome", "transport")...)
	},
	"PgfailoverReplicaStale": func(h history) {
		h.set(constant(45), "pgfailover_replica_staleness_seconds", db2...)
	},
	"PgfailoverReadsOffLaggingReplicas": func(h history) {
		h.set(perSecond(2), "pgfailover_reads_total", "pgfailover_destination", "primary", "pgfailover_reason", "lagging")
	},
	"PgfailoverReaderOnPrimary": func(h history) {
		h.set(perSecond(2), "pgfailover_reads_total", "pgfailover_destination", "primary", "pgfailover_reason", "unavailable")
	},
	"PgfailoverPatroniUnreachable": func(h history) {
		h.set(until(hour-600, perSecond(1.0/3)), "pgfailover_patroni_requests_total", "outcome", "ok")
		h.set(perSecond(1.0/3), "pgfailover_patroni_requests_total", "outcome", "error")
	},
	"PgfailoverLocalFallbackActive": func(h history) {
		h.set(constant(1), "pgfailover_fallback_active_ratio")
	},
	"PgfailoverAcquireTimeouts": func(h history) {
		h.set(at(hour-60), "db_client_connection_timeouts_total", "db_client_connection_pool_name", "db-1:5432/app/calls")
	},
}

// TestAlertsFire evaluates each alert's expression with Prometheus's
// query engine at the end of an hour of scrapes: on a healthy hour none
// fires, and each fires on its own trouble (troubles), which every alert
// of the file must have. The for clauses are not waited out: each trouble
// lasts long enough for them.
func TestAlertsFire(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile("alerts.yml", false, model.LegacyValidation, p, nil)
	if len(errs) > 0 {
		t.Fatal(errs) // TestAlerts says more
	}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute, Parser: p})
	start := time.Unix(1_800_000_000, 0)
	fires := func(expr string, h history) bool {
		t.Helper()
		q, err := engine.NewInstantQuery(context.Background(), h.queryable(start), nil, expr, start.Add(hour*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		v, err := q.Exec(context.Background()).Vector()
		if err != nil {
			t.Fatal(err)
		}
		return len(v) > 0
	}
	seen := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			seen[r.Alert] = true
			if fires(r.Expr, healthy()) {
				t.Errorf("%s fires on a healthy hour", r.Alert)
			}
			trouble, ok := troubles[r.Alert]
			if !ok {
				t.Errorf("%s: no trouble in troubles to fire it", r.Alert)
				continue
			}
			h := healthy()
			trouble(h)
			if !fires(r.Expr, h) {
				t.Errorf("%s does not fire on its trouble", r.Alert)
			}
		}
	}
	for name := range troubles {
		if !seen[name] {
			t.Errorf("troubles has %s, which alerts.yml does not", name)
		}
	}
}

// queryable serves h's samples, one every 15 s from start.
func (h history) queryable(start time.Time) storage.Queryable {
	return &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
			var out []storage.Series
			for _, key := range slices.Sorted(maps.Keys(h)) {
				s := h[key]
				if !matches(s.lset, ms) {
					continue
				}
				var samples []chunks.Sample
				for sec := 0.0; sec <= hour; sec += 15 {
					samples = append(samples, sample{start.UnixMilli() + int64(sec*1000), s.value(sec)})
				}
				out = append(out, storage.NewListSeries(s.lset, samples))
			}
			slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
			return &seriesSet{list: out}
		},
	}}
}

func matches(lset labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

// sample is one float sample.
type sample struct {
	t int64
	f float64
}

func (s sample) T() int64                      { return s.t }
func (s sample) ST() int64                     { return 0 }
func (s sample) F() float64                    { return s.f }
func (s sample) H() *histogram.Histogram       { return nil }
func (s sample) FH() *histogram.FloatHistogram { return nil }
func (s sample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s sample) Copy() chunks.Sample           { return s }

// seriesSet walks a list of series.
type seriesSet struct {
	list []storage.Series
	i    int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i <= len(s.list) }
func (s *seriesSet) At() storage.Series                { return s.list[s.i-1] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }
