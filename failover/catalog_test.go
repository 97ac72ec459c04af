package failover_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// instrumentName finds the name passed to an instrument's constructor:
// meter.Int64Counter("pgfailover.x", ...), or the telemetry's own counter
// and seconds helpers.
var instrumentName = regexp.MustCompile(`(?:Counter|Histogram|Gauge|counter|seconds)\(\s*"([a-z_.]+)"`)

// attributeKey finds the key of an attribute built in code.
var attributeKey = regexp.MustCompile(`attribute\.(?:String|Int|Int64|Bool|Float64)\(\s*"([a-z_.]+)"`)

// sourceMatches returns every first group of re in the non-test Go files
// of dirs, sorted and without repeats.
func sourceMatches(t *testing.T, re *regexp.Regexp, dirs ...string) []string {
	t.Helper()
	var out []string
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range re.FindAllStringSubmatch(string(src), -1) {
				out = append(out, m[1])
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// catalogPage is the one page that holds the metric catalog.
const catalogPage = "../docs/observability.md"

// pageSection returns catalogPage's text from heading to the next heading
// of the same level.
func pageSection(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile(catalogPage)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s has no %q", catalogPage, heading)
	}
	s = s[i+len(heading)+2:]
	level := heading[:strings.IndexByte(heading, ' ')+1]
	if j := strings.Index(s, "\n"+level); j >= 0 {
		s = s[:j]
	}
	return s
}

// TestMetricCatalogIsComplete keeps the metric catalog in
// docs/observability.md true: a row for every instrument the library
// creates, no row for one it does not, and every attribute key it records
// named on the page.
func TestMetricCatalogIsComplete(t *testing.T) {
	catalog := pageSection(t, "## Metric catalog")
	page, err := os.ReadFile(catalogPage)
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{".", "../internal/telemetry", "../patroni"}
	names := sourceMatches(t, instrumentName, dirs...)
	if len(names) < 20 {
		t.Fatalf("found only %d instruments in the source: %v", len(names), names)
	}
	rows := map[string]bool{}
	for _, line := range strings.Split(catalog, "\n") {
		if strings.HasPrefix(line, "| `") {
			rows[strings.Trim(strings.Fields(line)[1], "`")] = true
		}
	}
	for _, n := range names {
		if !rows[n] {
			t.Errorf("the metric catalog (%s) has no row for %s", catalogPage, n)
		}
		delete(rows, n)
	}
	for n := range rows {
		t.Errorf("the metric catalog (%s) lists %s, which the library does not record", catalogPage, n)
	}
	for _, k := range sourceMatches(t, attributeKey, dirs...) {
		if !strings.Contains(string(page), "`"+k+"`") {
			t.Errorf("%s does not name the attribute %s", catalogPage, k)
		}
	}
}
