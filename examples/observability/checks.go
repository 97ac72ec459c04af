package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/hosthealth"
)

// metricChecks is what the self-check asks of /metrics after the failover,
// in the exporter's Prometheus names of the metric catalog (docs/observability.md). Each
// line names one family (or families, of which one must do it) and what it
// must show. The self-check scrapes again until one scrape after the
// failover passes them all, and fails with those that did not when a
// minute has gone by.
var metricChecks = []struct {
	families []string
	want     want
}{
	// Every host, with its state and role; the new primary as one.
	{[]string{"pgfailover_host_state"}, everyHost},
	{[]string{"pgfailover_host_state"}, promotedIsPrimary},
	// The calls in flight when the primary died, and those that came
	// before the new one took writes, failed over: by outcome, with the
	// attempts each made, the time each waited, and the failover's
	// duration, attributed to the host that failed.
	{[]string{"pgfailover_failover_survived_total", "pgfailover_failover_failed_total"}, moved},
	{[]string{"pgfailover_call_attempts"}, moved},
	{[]string{"pgfailover_failover_wait_seconds"}, moved},
	{[]string{"pgfailover_failover_duration_seconds"}, moved},
	{[]string{"pgfailover_failover_duration_seconds"}, namesOld},
	// The Reader's reads, by destination and reason.
	{[]string{"pgfailover_reads_total"}, moved},
	// A replica's staleness bound, once sampled.
	{[]string{"pgfailover_replica_staleness_seconds"}, present},
	// Probes of every host; the killed primary's failed.
	{[]string{"pgfailover_probes_total"}, everyHost},
	{[]string{"pgfailover_probes_total"}, oldProbesFailed},
	// The pools refilled on the new primary.
	{[]string{"pgfailover_connection_attempts_total"}, moved},
	{[]string{"db_client_connection_create_time_seconds"}, moved},
	{[]string{"pgfailover_pool_acquires_total"}, moved},
	// Each host's pools, by name and state.
	{[]string{"db_client_connection_count"}, everyHost},
	{[]string{"db_client_connection_max"}, everyHost},
	{[]string{"db_client_connection_timeouts_total"}, present},
	{[]string{"pgfailover_pool_acquire_wait_time_seconds_total"}, present},
}

// scrapes is what the checks look at.
type scrapes struct {
	before, after map[string]*dto.MetricFamily // /metrics before and after the failover
	hosts         []hostJSON                   // /hosts after the failover
	configured    []string                     // the connection string's hosts
	old, promoted string                       // the primary before and after
}

// want is one kind of check of families.
type want struct {
	what string
	test func(s *scrapes, families []string) error
}

var (
	present = want{"present", func(s *scrapes, families []string) error {
		for _, f := range families {
			if len(s.after[f].GetMetric()) > 0 {
				return nil
			}
		}
		return errors.New("absent")
	}}
	moved = want{"moved across the failover", func(s *scrapes, families []string) error {
		var before, after float64
		for _, f := range families {
			before += total(s.before[f])
			after += total(s.after[f])
		}
		if after <= before {
			return fmt.Errorf("%g before, %g after", before, after)
		}
		return nil
	}}
	everyHost = want{"a series for every host", func(s *scrapes, families []string) error {
		seen := map[string]bool{}
		for _, f := range families {
			for _, m := range s.after[f].GetMetric() {
				seen[hostOf(m)] = true
			}
		}
		var missing []string
		for _, h := range s.configured {
			if !seen[h] {
				missing = append(missing, h)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("no series for %s", strings.Join(missing, ", "))
		}
		return nil
	}}
	namesOld = want{"names the killed primary", func(s *scrapes, families []string) error {
		for _, f := range families {
			for _, m := range s.after[f].GetMetric() {
				if hostOf(m) == s.old {
					return nil
				}
			}
		}
		return fmt.Errorf("no series for %s", s.old)
	}}
	oldProbesFailed = want{"probes of the killed primary failed", func(s *scrapes, families []string) error {
		for _, f := range families {
			for _, m := range s.after[f].GetMetric() {
				if hostOf(m) == s.old && label(m, "pgfailover_probe_outcome") != "ok" && value(m) > 0 {
					return nil
				}
			}
		}
		return fmt.Errorf("no failed probe of %s", s.old)
	}}
	promotedIsPrimary = want{"the promoted host healthy and primary", func(s *scrapes, families []string) error {
		for _, f := range families {
			for _, m := range s.after[f].GetMetric() {
				if hostOf(m) == s.promoted && label(m, "pgfailover_role") == "primary" && label(m, "pgfailover_state") == "healthy" {
					return nil
				}
			}
		}
		return fmt.Errorf("no healthy primary series for %s", s.promoted)
	}}
)

// hostOf returns the host a series is of, from its server.address and
// server.port; "" for a series of no one host.
func hostOf(m *dto.Metric) string {
	if addr := label(m, "server_address"); addr != "" {
		return net.JoinHostPort(addr, label(m, "server_port"))
	}
	return ""
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// total adds up a family's series.
func total(f *dto.MetricFamily) float64 {
	var n float64
	for _, m := range f.GetMetric() {
		n += value(m)
	}
	return n
}

// value is a counter's or a gauge's value, or a histogram's count.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// hostChecks is what the self-check asks of /hosts after the failover.
func hostChecks(s *scrapes) []error {
	var errs []error
	byAddr := map[string]hostJSON{}
	for _, h := range s.hosts {
		if _, dup := byAddr[h.Address]; dup {
			errs = append(errs, fmt.Errorf("/hosts lists %s twice", h.Address))
		}
		byAddr[h.Address] = h
	}
	for _, addr := range s.configured {
		if _, ok := byAddr[addr]; !ok {
			errs = append(errs, fmt.Errorf("/hosts lacks %s", addr))
		}
	}
	if h := byAddr[s.promoted]; h.Role != "primary" || h.State != "healthy" || h.Calls.Total == 0 {
		errs = append(errs, fmt.Errorf("/hosts: the promoted host %s is %s %s with %d connections for calls, want a healthy primary that took the writes", s.promoted, h.State, h.Role, h.Calls.Total))
	}
	if h := byAddr[s.old]; h.State == "healthy" {
		errs = append(errs, fmt.Errorf("/hosts: the killed primary %s is still healthy", s.old))
	}
	return errs
}

// selfCheck fails the primary over under the load, then scrapes /metrics
// and /hosts until every check holds, and prints each check's outcome.
func selfCheck(ctx context.Context, base, drillURL string, pool *failover.Pool, l *load) error {
	s := &scrapes{}
	for _, h := range pool.Config().Hosts {
		s.configured = append(s.configured, h.Addr())
	}

	// The load runs, and every host's role is known.
	if err := waitFor(ctx, "the load to run and every host's role to be known", func() bool {
		primaries := 0
		for _, h := range pool.Stat().Hosts() {
			if h.Role == hosthealth.RoleUnknown {
				return false
			}
			if h.Role == hosthealth.RolePrimary {
				primaries++
				s.old = h.Addr
			}
		}
		return primaries == 1 && l.writes.Load() >= 20 && l.reads.Load() >= 20
	}); err != nil {
		return err
	}
	var err error
	if s.before, _, err = scrapeMetrics(ctx, base); err != nil {
		return err
	}

	fmt.Printf("killing the primary %s; load so far: %s\n", s.old, l)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, drillURL, nil)
	if err != nil {
		return err
	}
	body, err := do(req)
	if err != nil {
		return err
	}
	s.promoted = strings.TrimSpace(string(body))
	fmt.Printf("failover: the new primary is %s\n", s.promoted)

	password := pool.Config().ConnConfig.Password
	var failures []string
	err = waitFor(ctx, "every check to hold", func() bool {
		failures = failures[:0]
		var metricsBody, hostsBody []byte
		var err error
		if s.after, metricsBody, err = scrapeMetrics(ctx, base); err != nil {
			failures = append(failures, err.Error())
			return false
		}
		if hostsBody, err = get(ctx, base+"/hosts"); err == nil {
			err = json.Unmarshal(hostsBody, &s.hosts)
		}
		if err != nil {
			failures = append(failures, "/hosts: "+err.Error())
			return false
		}
		for _, c := range metricChecks {
			if err := c.want.test(s, c.families); err != nil {
				failures = append(failures, fmt.Sprintf("%s: %s: %v", strings.Join(c.families, " or "), c.want.what, err))
			}
		}
		for _, err := range hostChecks(s) {
			failures = append(failures, err.Error())
		}
		if password != "" && (bytes.Contains(metricsBody, []byte(password)) || bytes.Contains(hostsBody, []byte(password))) {
			failures = append(failures, "the password appears in /metrics or /hosts")
		}
		return len(failures) == 0
	})
	if err != nil {
		for _, f := range failures {
			fmt.Println("FAIL", f)
		}
		return fmt.Errorf("%w: %v", errCheckFailed, err)
	}
	for _, c := range metricChecks {
		fmt.Printf("ok   %s: %s\n", strings.Join(c.families, " or "), c.want.what)
	}
	fmt.Printf("ok   /hosts: every host once, %s a healthy primary, %s not healthy\n", s.promoted, s.old)
	fmt.Printf("the self-check passed: %d families on /metrics, %d hosts on /hosts\n", len(s.after), len(s.hosts))
	return nil
}

// scrapeMetrics gets /metrics over HTTP and parses it.
func scrapeMetrics(ctx context.Context, base string) (map[string]*dto.MetricFamily, []byte, error) {
	body, err := get(ctx, base+"/metrics")
	if err != nil {
		return nil, nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("parsing /metrics: %w", err)
	}
	return families, body, nil
}

// waitFor polls cond until it holds or ctx ends, up to a minute.
func waitFor(ctx context.Context, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}
