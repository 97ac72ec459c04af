package failover_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// lockedBuffer is a log destination several Pools write to at once.
type lockedBuffer struct {
	mu  sync.Mutex // guards buf; no I/O while held
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// witness collects everything the library says while a test drives it:
// error strings, log lines, metric attributes, span names, attributes,
// events and statuses, and each Pool's Stat().Hosts().
type witness struct {
	t       *testing.T
	logs    *lockedBuffer
	logger  *slog.Logger
	reader  *sdkmetric.ManualReader
	meters  *sdkmetric.MeterProvider
	spans   *tracetest.SpanRecorder
	tracers *sdktrace.TracerProvider
	said    []string // errors (text and fields) and Stat().Hosts(), as collected
}

func newWitness(t *testing.T) *witness {
	w := &witness{t: t, logs: &lockedBuffer{}, spans: tracetest.NewSpanRecorder()}
	w.logger = slog.New(slog.NewJSONHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w.reader, w.meters = newMeter(t)
	w.tracers = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(w.spans))
	return w
}

// config parses dsn and gives it the witness's providers and Logger.
func (w *witness) config(dsn string) *failover.Config {
	w.t.Helper()
	cfg, err := failover.ParseConfig(dsn)
	if err != nil {
		w.t.Fatalf("ParseConfig: %s", err) // the error is checked below too
	}
	cfg.MeterProvider, cfg.TracerProvider, cfg.Logger = w.meters, w.tracers, w.logger
	return cfg
}

// err records an error the library returned: its text, and the fields of
// every error in its chain, for a caller that prints them with %#v.
func (w *witness) err(what string, err error) {
	if err == nil {
		w.said = append(w.said, what+": no error")
		return
	}
	w.said = append(w.said, fmt.Sprintf("%s: %v | %+v", what, err, err))
	chain := []error{err}
	for len(chain) > 0 {
		e := chain[0]
		chain = chain[1:]
		if v := reflect.ValueOf(e); v.Kind() == reflect.Pointer && !v.IsNil() {
			w.said = append(w.said, fmt.Sprintf("%s: %T %#v", what, e, v.Elem().Interface()))
		} else {
			w.said = append(w.said, fmt.Sprintf("%s: %T %#v", what, e, e))
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			if next := u.Unwrap(); next != nil {
				chain = append(chain, next)
			}
		case interface{ Unwrap() []error }:
			chain = append(chain, u.Unwrap()...)
		}
	}
}

// hosts records a Pool's Stat().Hosts().
func (w *witness) hosts(what string, pool *failover.Pool) {
	for _, h := range pool.Stat().Hosts() {
		w.said = append(w.said, fmt.Sprintf("%s: %+v pool %+v reads %+v", what, h, h.Pool, h.Reads))
	}
}

// metrics returns every metric point's name and attributes, as "name
// key=value" lines.
func (w *witness) metrics(ctx context.Context) []string {
	w.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := w.reader.Collect(ctx, &rm); err != nil {
		w.t.Fatal(err)
	}
	var out []string
	add := func(name string, sets ...attribute.Set) {
		for _, set := range sets {
			for _, kv := range set.ToSlice() {
				out = append(out, name+" "+string(kv.Key)+"="+kv.Value.String())
			}
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				add(m.Name, pointSets(d.DataPoints)...)
			case metricdata.Sum[float64]:
				add(m.Name, pointSets(d.DataPoints)...)
			case metricdata.Gauge[int64]:
				add(m.Name, pointSets(d.DataPoints)...)
			case metricdata.Gauge[float64]:
				add(m.Name, pointSets(d.DataPoints)...)
			case metricdata.Histogram[int64]:
				add(m.Name, histogramSets(d.DataPoints)...)
			case metricdata.Histogram[float64]:
				add(m.Name, histogramSets(d.DataPoints)...)
			default:
				w.t.Errorf("metric %s: %T is not read by this test", m.Name, m.Data)
			}
		}
	}
	return out
}

func pointSets[N int64 | float64](ps []metricdata.DataPoint[N]) []attribute.Set {
	sets := make([]attribute.Set, len(ps))
	for i, p := range ps {
		sets[i] = p.Attributes
	}
	return sets
}

func histogramSets[N int64 | float64](ps []metricdata.HistogramDataPoint[N]) []attribute.Set {
	sets := make([]attribute.Set, len(ps))
	for i, p := range ps {
		sets[i] = p.Attributes
	}
	return sets
}

// traces returns every span's name, attributes, status and events, ended
// or not, one line each.
func (w *witness) traces() []string {
	var out []string
	for _, s := range w.spans.Started() {
		line := s.Name() + " " + s.Status().Code.String() + " " + s.Status().Description
		for _, kv := range s.Attributes() {
			line += " " + string(kv.Key) + "=" + kv.Value.String()
		}
		out = append(out, line)
		for _, e := range s.Events() {
			line := "  event " + e.Name
			for _, kv := range e.Attributes {
				line += " " + string(kv.Key) + "=" + kv.Value.String()
			}
			out = append(out, line)
		}
	}
	return out
}

// TestNothingSaysThePassword: a password in the connection string, a login
// refused for a wrong one, connection strings the parser refuses, a Patroni
// API that answers garbage or 500 (its URLs carrying a password of their
// own), and a failover followed by a call that cannot complete. Every
// error string, log line, metric attribute, span (attributes, events,
// status) and Stat().Hosts() field is collected: none holds either
// password.
func TestNothingSaysThePassword(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	const (
		password = "Redact-Me-7f3a9c"   // the cluster's
		wrong    = "Wrong-Guess-91be44" // refused
	)
	c := failovertest.Start(t, failovertest.Password(password))
	if !strings.Contains(c.ConnString(""), password) {
		t.Fatalf("the connection string %q does not carry the password", c.ConnString(""))
	}
	withWrong := func(dsn string) string {
		t.Helper()
		out := strings.Replace(dsn, ":"+password+"@", ":"+wrong+"@", 1)
		if out == dsn {
			t.Fatal("could not replace the password in the connection string")
		}
		return out
	}
	w := newWitness(t)

	// A login refused at New, and on a lazy Pool by its first call (its
	// probes are refused in the background meanwhile).
	_, err := failover.NewWithConfig(ctx, w.config(withWrong(c.ConnString(""))))
	w.err("New with a wrong password", err)
	lazy, err := failover.NewWithConfig(ctx, w.config(withWrong(c.ConnString("lazy_connect=on&failover_max_duration=3s"))))
	if err != nil {
		t.Fatal(err)
	}
	_, err = lazy.Exec(ctx, "SELECT 1")
	w.err("a lazy Pool's call with a wrong password", err)
	w.hosts("the lazy Pool with a wrong password", lazy)
	lazy.Close()

	// Connection strings the parser refuses, each with a password in it.
	primary, primaryPort := c.Primary().Addr(), strconv.Itoa(c.Primary().Port())
	for _, dsn := range []string{
		"postgres://postgres:" + password + "@" + primary + "/postgres?failover_max_attempts=many",
		"postgres://postgres:" + password + "@127.0.0.1:notaport/postgres",
		"postgres://postgres:" + wrong + "@" + primary + "/postgres?target_session_attrs=bogus",
		"host=127.0.0.1 user=postgres password=" + password + " health_probe_interval=-1s",
		"host=127.0.0.1 user=postgres password='" + wrong + "' failover_max_duration",
		"postgres://postgres:" + password + "@" + primary + "/postgres?patroni_api_urls=http://patroni:" + wrong + "@[::1",
		"postgres://postgres:" + password + "@" + primary + "/postgres?patroni_api_urls=ftp://patroni:" + wrong + "@127.0.0.1:8008",
	} {
		_, err := failover.ParseConfig(dsn)
		if err == nil {
			t.Errorf("ParseConfig took a bad connection string")
		}
		w.err("ParseConfig", err)
		_, err = failover.New(ctx, dsn)
		w.err("New", err)
	}

	// A Patroni API that answers garbage and one that fails, both behind
	// URLs with a password: the Pool keeps the connection string's hosts
	// and warns.
	garbage := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprint(rw, `{"members": [{"name": "a", "role": 7`)
	}))
	t.Cleanup(garbage.Close)
	failing := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		http.Error(rw, "patroni is down", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	withAuth := func(u string) string {
		return strings.Replace(u, "http://", "http://patroni:"+wrong+"@", 1)
	}
	patroniPool, err := failover.NewWithConfig(ctx, w.config(c.ConnString(
		"lazy_connect=on&patroni_refresh_interval=100ms&patroni_api_urls="+withAuth(garbage.URL)+","+withAuth(failing.URL))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(patroniPool.Close)
	_, err = patroniPool.Exec(ctx, "SELECT 1")
	w.err("a call with the Patroni API failing", err)
	waitUntil(t, 10*time.Second, "the Patroni source's warning", func() bool {
		return strings.Contains(w.logs.String(), "cannot read /cluster")
	})

	// A failover: the primary is killed and the replica promoted; the next
	// write finds the old primary gone and goes to the new one. Probes are
	// effectively off, so the write is what notices.
	pool, err := failover.NewWithConfig(ctx, w.config(c.ConnString("health_probe_interval=1h&failover_max_duration=3s")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, "CREATE TABLE redaction (v int)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if err := failoverTo(ctx, c, c.Replicas()[0]); err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(ctx, "INSERT INTO redaction VALUES (1)")
	w.err("a write across the failover", err)
	// Then no server is left: a call that cannot complete.
	if err := c.Primary().Crash(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(ctx, "INSERT INTO redaction VALUES (2)")
	if err == nil {
		t.Fatal("a write with every server down succeeded")
	}
	w.err("a write with every server down", err)
	w.hosts("the Pool after the failover", pool)
	w.hosts("the Patroni Pool after the failover", patroniPool)

	logs := w.logs.String()
	metrics := w.metrics(ctx)
	spans := w.traces()
	everything := map[string][]string{
		"errors and hosts": w.said,
		"logs":             strings.Split(logs, "\n"),
		"metrics":          metrics,
		"spans":            spans,
	}
	for kind, lines := range everything {
		for _, line := range lines {
			for _, secret := range []string{password, wrong} {
				if strings.Contains(line, secret) {
					t.Errorf("%s: the password %q appears in %s", kind, secret, line)
				}
			}
		}
	}
	// The capture itself worked: each kind names the killed primary's port
	// (metrics and spans carry it as server.port), and the refusals and the
	// Patroni warning are there.
	for kind, lines := range everything {
		if !strings.Contains(strings.Join(lines, "\n"), primaryPort) {
			t.Errorf("%s never name the killed primary's port %s: the capture missed them:\n%s", kind, primaryPort, strings.Join(lines, "\n"))
		}
	}
	for _, want := range []string{"28P01", "failover_max_attempts", "health_probe_interval", "patroni_api_urls", "failed to connect"} {
		if !strings.Contains(strings.Join(w.said, "\n"), want) {
			t.Errorf("no error mentions %s:\n%s", want, strings.Join(w.said, "\n"))
		}
	}
	if !strings.Contains(logs, "patroni: cannot read /cluster") {
		t.Errorf("no Patroni warning logged:\n%s", logs)
	}
	t.Logf("%d errors and hosts, %d log lines, %d metric attributes, %d span lines: none holds a password",
		len(w.said), strings.Count(logs, "\n"), len(metrics), len(spans))
}
