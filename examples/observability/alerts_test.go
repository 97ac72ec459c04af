package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"job", "instance"}

var templateLabel = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)

// TestAlerts checks alerts.yml as Prometheus loads it, with its own rule
// file parser (the one promtool check rules runs: the YAML's fields, each
// expression, each annotation's template), and then each alert against
// what /metrics shows: every series it reads is one the exporter writes
// for the catalog; every label it matches, groups or joins by, or names in
// an annotation, is one of those series' or a target label; every label
// value it matches is one the metric catalog names. Each alert has a
// severity, a summary and a description that says what to do.
func TestAlerts(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile("alerts.yml", false, model.LegacyValidation, p, nil)
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		return
	}
	series := exported(t)
	documented := map[string]bool{}
	for _, m := range backticked.FindAllStringSubmatch(catalogSection(t), -1) {
		documented[m[1]] = true
	}

	names := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: recording rule %s; the file holds alerts", g.Name, r.Record)
				continue
			}
			if names[r.Alert] {
				t.Errorf("%s: twice", r.Alert)
			}
			names[r.Alert] = true
			if s := r.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || !strings.Contains(r.Annotations["description"], "What to do:") {
				t.Errorf("%s: wants a summary, and a description that says what to do", r.Alert)
			}
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("%s: %v", r.Alert, err) // rulefmt reported it already
				continue
			}
			for _, err := range checkExpr(expr, series, documented) {
				t.Errorf("%s: %v", r.Alert, err)
			}
			have := slices.Clone(targetLabels)
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					have = append(have, series[vs.Name]...)
				}
				return nil
			})
			for _, a := range []string{r.Annotations["summary"], r.Annotations["description"]} {
				for _, m := range templateLabel.FindAllStringSubmatch(a, -1) {
					if !slices.Contains(have, m[1]) {
						t.Errorf("%s: an annotation names $labels.%s, which its series do not have", r.Alert, m[1])
					}
				}
			}
		}
	}
	if len(names) < 10 {
		t.Errorf("%d alerts: the file lost its rules", len(names))
	}
}

// checkExpr checks the series, labels and label values an expression
// names against series (the exporter's, with their labels) and documented
// (the values the metric catalog names).
func checkExpr(expr parser.Expr, series map[string][]string, documented map[string]bool) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	have := slices.Clone(targetLabels)
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		l, ok := series[vs.Name]
		if !ok {
			fail("%s is no series of the metric catalog", vs.Name)
			return nil
		}
		have = append(have, l...)
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel {
				continue
			}
			if !slices.Contains(l, m.Name) {
				fail("%s has no label %s", vs.Name, m.Name)
			}
			values := []string{m.Value}
			if m.Type == labels.MatchRegexp || m.Type == labels.MatchNotRegexp {
				values = strings.Split(m.Value, "|")
			}
			for _, v := range values {
				if !documented[v] {
					fail("%s: the metric catalog names no value %q", m, v)
				}
			}
		}
		return nil
	})
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		var used []string
		switch n := n.(type) {
		case *parser.AggregateExpr:
			used = n.Grouping
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				used = append(slices.Clone(n.VectorMatching.MatchingLabels), n.VectorMatching.Include...)
			}
		}
		for _, l := range used {
			if !slices.Contains(have, l) {
				fail("groups or joins by %s, which its series do not have", l)
			}
		}
		return nil
	})
	return errs
}
