package patroni

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/pgfailover/pgfailover/internal/clock"
)

const secret = "Sup3rSecret"

// fakeAPI is a Patroni REST API stand-in that counts the requests it gets.
type fakeAPI struct {
	*httptest.Server
	requests atomic.Int32
}

// newFakeAPI serves handler at /cluster and 404 elsewhere.
func newFakeAPI(t *testing.T, handler http.HandlerFunc) *fakeAPI {
	t.Helper()
	api := &fakeAPI{}
	api.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.requests.Add(1)
		if r.URL.Path != "/cluster" {
			http.NotFound(w, r)
			return
		}
		handler(w, r)
	}))
	t.Cleanup(api.Close)
	return api
}

// answer serves body as the answer of /cluster.
func answer(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

// hang answers only once the client has gone, and then closes gone.
func hang(gone chan<- struct{}) http.HandlerFunc {
	var once sync.Once
	return func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		once.Do(func() { close(gone) })
	}
}

// countingTransport counts the round trips in progress, so a test can see
// that Cluster waited for every request it started.
type countingTransport struct {
	inner  http.RoundTripper
	active atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.active.Add(1)
	defer c.active.Add(-1)
	return c.inner.RoundTrip(r)
}

// newTestClient builds a Client whose round trips are counted; it closes
// its idle connections when the test ends.
func newTestClient(t *testing.T, cfg ClientConfig) (*Client, *countingTransport) {
	t.Helper()
	base := http.DefaultTransport.(*http.Transport).Clone()
	ct := &countingTransport{inner: base}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: ct}
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(base.CloseIdleConnections)
	return c, ct
}

// deadURL returns the URL of a server that has gone: connections to it
// are refused.
func deadURL(t *testing.T) string {
	s := httptest.NewServer(http.NotFoundHandler())
	s.Close()
	return s.URL
}

func withUser(url string) string {
	return strings.Replace(url, "http://", "http://app:"+secret+"@", 1)
}

// waitFor polls cond until it holds, failing the test after ten seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestClusterAnswer(t *testing.T) {
	api := newFakeAPI(t, answer(string(readTestdata(t, "patroni-3.0.2-cluster.json"))))
	c, ct := newTestClient(t, ClientConfig{URLs: []string{api.URL}})
	cl, err := c.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.Members) != 3 || cl.Members[0].Role != RoleLeader {
		t.Fatalf("%+v", cl.Members)
	}
	if ct.active.Load() != 0 {
		t.Fatal("a request still in progress after Cluster returned")
	}
}

func TestClusterFailures(t *testing.T) {
	big := strings.Repeat(" ", 10<<20) // 10 MiB of valid JSON whitespace
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string
		is      error
	}{
		{"malformed JSON", answer(`{"members":[{"name":`), "decoding /cluster", nil},
		{"HTML error page", answer(`<html>oops</html>`), "invalid character", nil},
		{"10 MiB body", answer(`{"members":[]}` + big), "more than 1048576 bytes", ErrBodyTooLarge},
		{"status 503", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }, "status 503", ErrStatus},
		{"no members list", answer(`{"scope":"x"}`), "no members list", ErrNoMembers},
		{"members without host", answer(`{"members":[{"name":"a","port":1},{"name":"b","host":7,"port":1}]}`), "(2 skipped)", ErrNoUsableMember},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI(t, tt.handler)
			c, ct := newTestClient(t, ClientConfig{URLs: []string{withUser(api.URL)}})
			_, err := c.Cluster(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) || !strings.Contains(msg, api.URL+"/cluster") {
				t.Errorf("error %q should name %s and contain %q", msg, api.URL, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v) is false: %v", tt.is, err)
			}
			if strings.Contains(msg, secret) {
				t.Errorf("the password is in the error: %s", msg)
			}
			if ct.active.Load() != 0 {
				t.Fatal("a request still in progress after Cluster returned")
			}
		})
	}
}

func TestClusterTimeout(t *testing.T) {
	api := newFakeAPI(t, hang(make(chan struct{})))
	c, ct := newTestClient(t, ClientConfig{URLs: []string{api.URL}, Timeout: 50 * time.Millisecond})
	_, err := c.Cluster(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a deadline error, got %v", err)
	}
	if ct.active.Load() != 0 {
		t.Fatal("the request still in progress after Cluster returned")
	}
}

func TestClusterFirstGoodWins(t *testing.T) {
	slow := newFakeAPI(t, hang(make(chan struct{})))
	broken := newFakeAPI(t, answer(`not json`))
	good := newFakeAPI(t, answer(string(readTestdata(t, "patroni-4.x-cluster.json"))))
	// The slow server answers only when its request is cancelled, and the
	// timeout is long: Cluster returns only if it cancels the losers.
	c, ct := newTestClient(t, ClientConfig{URLs: []string{deadURL(t), slow.URL, broken.URL, good.URL}, Timeout: time.Hour})
	var cl *Cluster
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		cl, err = c.Cluster(context.Background())
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Cluster did not return: the losing request was not cancelled")
	}
	if err != nil {
		t.Fatal(err)
	}
	if cl.Scope != "orders" {
		t.Fatalf("scope %q", cl.Scope)
	}
	if ct.active.Load() != 0 {
		t.Fatal("the slow request was not ended before Cluster returned")
	}
}

func TestClusterAllFail(t *testing.T) {
	dead := deadURL(t)
	broken := newFakeAPI(t, answer(`[]`))
	c, _ := newTestClient(t, ClientConfig{URLs: []string{withUser(dead), withUser(broken.URL)}, Password: secret})
	_, err := c.Cluster(context.Background())
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{dead + "/cluster: dial tcp", broken.URL + "/cluster: patroni: decoding"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	perr, ok := errors.AsType[*Error](err)
	if !ok || len(perr.URLs) != 2 {
		t.Fatalf("want an *Error naming two URLs, got %#v", err)
	}
	for _, u := range perr.URLs {
		if u.URL != dead+"/cluster" && u.URL != broken.URL+"/cluster" {
			t.Errorf("URL %q", u.URL)
		}
	}
	if strings.Contains(msg, secret) {
		t.Errorf("the password is in the error: %s", msg)
	}
}

func TestClusterSharedByConcurrentCallers(t *testing.T) {
	release := make(chan struct{})
	body := string(readTestdata(t, "patroni-3.0.2-cluster.json"))
	held := func(w http.ResponseWriter, r *http.Request) {
		<-release
		answer(body)(w, r)
	}
	a, b := newFakeAPI(t, held), newFakeAPI(t, held)
	c, _ := newTestClient(t, ClientConfig{URLs: []string{a.URL, b.URL}})

	const callers = 1000
	var wg sync.WaitGroup
	results := make(chan *Cluster, callers)
	for range callers {
		wg.Go(func() {
			cl, err := c.Cluster(context.Background())
			if err != nil {
				t.Error(err)
			}
			results <- cl
		})
	}
	waitFor(t, "every caller to join the round", func() bool {
		return c.rounds.Waiting() == callers
	})
	// Both requests of the round must have arrived before either is
	// answered: the first answer cancels a request still being sent.
	waitFor(t, "both endpoints to be asked", func() bool {
		return a.requests.Load() == 1 && b.requests.Load() == 1
	})
	close(release)
	wg.Wait()
	close(results)
	first := <-results
	for cl := range results {
		if cl != first {
			t.Fatal("callers got different answers from one round")
		}
	}
	if a.requests.Load() != 1 || b.requests.Load() != 1 {
		t.Fatalf("requests: %d and %d, want 1 each", a.requests.Load(), b.requests.Load())
	}
	// The next call starts a new round.
	if _, err := c.Cluster(context.Background()); err != nil {
		t.Fatal(err)
	}
	// (The slower of the two may be cancelled before it is sent.)
	if a.requests.Load()+b.requests.Load() < 3 {
		t.Fatalf("requests: %d and %d, want a new round", a.requests.Load(), b.requests.Load())
	}
}

func TestClusterCallerGivesUp(t *testing.T) {
	gone := make(chan struct{})
	api := newFakeAPI(t, hang(gone))
	c, ct := newTestClient(t, ClientConfig{URLs: []string{api.URL}})

	// Two callers share a round; the first to give up leaves it running.
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() { _, err := c.Cluster(ctx1); errs <- err }()
	go func() { _, err := c.Cluster(ctx2); errs <- err }()
	waitFor(t, "both callers to join", func() bool {
		return c.rounds.Waiting() == 2 && api.requests.Load() == 1
	})
	cancel1()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("first caller: %v", err)
	}
	if ct.active.Load() != 1 {
		t.Fatal("the round ended when one of two callers gave up")
	}
	// The last caller to give up ends the round and waits for it.
	cancel2()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("second caller: %v", err)
	}
	if ct.active.Load() != 0 {
		t.Fatal("the round still running after its last caller left")
	}
	<-gone
}

func TestClusterBasicAuth(t *testing.T) {
	tests := []struct {
		name      string
		url       func(base string) string
		cfg       ClientConfig
		user, pwd string
	}{
		{"from the URL", func(b string) string { return strings.Replace(b, "http://", "http://u1:p%40ss@", 1) }, ClientConfig{}, "u1", "p@ss"},
		{"from the config", func(b string) string { return b }, ClientConfig{User: "u2", Password: secret}, "u2", secret},
		{"the URL's wins", func(b string) string { return strings.Replace(b, "http://", "http://u3:x@", 1) }, ClientConfig{User: "u2", Password: secret}, "u3", "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotUser, gotPwd string
			var gotOK bool
			api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
				gotUser, gotPwd, gotOK = r.BasicAuth()
				answer(string(readTestdata(t, "patroni-3.0.2-cluster.json")))(w, r)
			})
			cfg := tt.cfg
			cfg.URLs = []string{tt.url(api.URL)}
			c, _ := newTestClient(t, cfg)
			if _, err := c.Cluster(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !gotOK || gotUser != tt.user || gotPwd != tt.pwd {
				t.Errorf("basic auth %v %q %q, want %q %q", gotOK, gotUser, gotPwd, tt.user, tt.pwd)
			}
		})
	}
}

func TestNewClientErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  ClientConfig
		want string
	}{
		{"no URL", ClientConfig{}, "no API URL"},
		{"bad scheme", ClientConfig{URLs: []string{"ftp://app:" + secret + "@h/"}}, `"ftp://redacted@h/": scheme must be http or https`},
		{"bad port", ClientConfig{URLs: []string{"http://app:" + secret + "@h:port"}}, `"http://redacted@h:port": not a valid URL`},
		{"bad escape in password", ClientConfig{URLs: []string{"http://app:" + secret + "%zz@h"}}, `"http://redacted@h": not a valid URL`},
		{"no host", ClientConfig{URLs: []string{"http:///cluster"}}, "no host"},
		{"second URL", ClientConfig{URLs: []string{"http://h", "h:8008"}}, "API URL 2"},
		{"negative timeout", ClientConfig{URLs: []string{"http://h"}, Timeout: -1}, "negative"},
		{"TLS and HTTPClient", ClientConfig{URLs: []string{"http://h"}, TLS: &tls.Config{}, HTTPClient: http.DefaultClient}, "TLS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewClient(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the password is in the error: %s", err)
			}
		})
	}
}

func TestEndpointURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://h:8008", "http://h:8008/cluster"},
		{"http://h:8008/", "http://h:8008/cluster"},
		{"https://h/patroni", "https://h/patroni/cluster"},
		{"http://h/cluster", "http://h/cluster"},
		{"http://u:p@h:8008/#frag", "http://h:8008/cluster"},
		{"http://[::1]:8008?x=1", "http://[::1]:8008/cluster?x=1"},
	}
	for _, tt := range tests {
		ep, err := parseEndpoint(tt.in)
		if err != nil || ep.url != tt.want {
			t.Errorf("parseEndpoint(%q) = %q, %v; want %q", tt.in, ep.url, err, tt.want)
		}
	}
}

func TestClientOwnTransport(t *testing.T) {
	api := newFakeAPI(t, answer(string(readTestdata(t, "patroni-3.0.2-cluster.json"))))
	c, err := NewClient(ClientConfig{URLs: []string{api.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	if _, err := c.Cluster(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestClientMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	good := newFakeAPI(t, answer(string(readTestdata(t, "patroni-3.0.2-cluster.json"))))
	c, _ := newTestClient(t, ClientConfig{URLs: []string{deadURL(t)}, MeterProvider: mp})
	c2, _ := newTestClient(t, ClientConfig{URLs: []string{good.URL}, MeterProvider: mp})
	if _, err := c.Cluster(context.Background()); err == nil {
		t.Fatal("no error from a dead URL")
	}
	if _, err := c2.Cluster(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := collect(t, reader)
	want := map[string]int64{
		"pgfailover.patroni.requests/ok":    1,
		"pgfailover.patroni.requests/error": 1,
		"pgfailover.patroni.errors":         1,
		"pgfailover.patroni.duration":       2,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	// The durations fall in buckets of seconds, not the SDK's default.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "pgfailover.patroni.duration" {
				for _, p := range h.DataPoints {
					if !slices.Equal(p.Bounds, durationBuckets) {
						t.Errorf("%s bounds %v, want %v", m.Name, p.Bounds, durationBuckets)
					}
				}
			}
		}
	}
}

// TestClientDurationOnItsClock: a request is timed on the Client's clock:
// one during which that clock moves 7s is recorded as 7s, whatever the
// wall clock did.
func TestClientDurationOnItsClock(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	fake := clock.NewFake(time.Unix(1e9, 0))
	body := string(readTestdata(t, "patroni-3.0.2-cluster.json"))
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		fake.Advance(7 * time.Second)
		answer(body)(w, r)
	})
	c, _ := newTestClient(t, ClientConfig{URLs: []string{api.URL}, MeterProvider: mp, clock: fake})
	if _, err := c.Cluster(context.Background()); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var sums []float64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "pgfailover.patroni.duration" {
				for _, p := range h.DataPoints {
					sums = append(sums, p.Sum)
				}
			}
		}
	}
	if len(sums) != 1 || sums[0] != 7 {
		t.Errorf("recorded durations %v, want one of 7s", sums)
	}
}

// collect reads every counter and histogram of reader: a counter's total
// under its name (and name/outcome or name/change when it has that
// attribute), a
// histogram's count of records under its name.
func collect(t *testing.T, reader sdkmetric.Reader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					key := m.Name
					for _, k := range []attribute.Key{"outcome", "pgfailover.change"} {
						if v, ok := p.Attributes.Value(k); ok {
							key += "/" + v.AsString()
						}
					}
					got[key] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[m.Name] += int64(p.Count)
				}
			}
		}
	}
	return got
}

func TestPrintingHidesPasswords(t *testing.T) {
	cfg := ClientConfig{URLs: []string{"http://app:" + secret + "@h:8008", "http://h2"}, User: "app", Password: secret}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, v := range []any{cfg, &cfg, c} {
			if s := fmt.Sprintf(format, v); strings.Contains(s, secret) {
				t.Errorf("%s of %T shows the password: %s", format, v, s)
			}
		}
	}
	if got := c.String(); got != "patroni.Client{URLs: [http://h:8008/cluster http://h2/cluster]}" {
		t.Errorf("String() = %s", got)
	}
}

// An answer with odd members is used for what it has.
func TestClusterTolerant(t *testing.T) {
	api := newFakeAPI(t, answer(`{"members":[
 {"name":"a","role":"leader","state":"running","host":"h1","port":5432},
 {"name":"b","role":"witness","state":"running","host":"h2","port":5432},
 {"name":"c","role":"replica","state":"rebooting","host":"h3","port":5432,"lag":"lots"},
 {"name":"d","role":"replica","state":"streaming","port":5432},
 {"name":"e","role":"replica","state":"streaming","host":"h5","port":"x"}]}`))
	c, _ := newTestClient(t, ClientConfig{URLs: []string{api.URL}})
	cl, err := c.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range cl.Members {
		got = append(got, fmt.Sprint(m.Name, " ", m.Role, " ", m.Claims()))
	}
	for _, is := range cl.Issues {
		got = append(got, is.String())
	}
	want := []string{
		"a leader primary",
		"b unknown unknown",
		"c replica unknown",
		`member #2 "c": field lag ignored: want a byte count or "unknown", got a string "lots"`,
		`member #3 "d" skipped: no host`,
		`member #4 "e" skipped: port: want an integer, got a string "x"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An answer of exactly MaxBody bytes is read; one byte more is refused.
func TestClusterBodyLimit(t *testing.T) {
	body := string(readTestdata(t, "patroni-3.0.2-cluster.json"))
	api := newFakeAPI(t, answer(body))
	for _, tt := range []struct {
		max     int64
		tooLong bool
	}{{int64(len(body)), false}, {int64(len(body)) - 1, true}} {
		c, _ := newTestClient(t, ClientConfig{URLs: []string{api.URL}, MaxBody: tt.max})
		_, err := c.Cluster(context.Background())
		if errors.Is(err, ErrBodyTooLarge) != tt.tooLong || (err != nil) != tt.tooLong {
			t.Errorf("MaxBody %d for %d bytes: %v", tt.max, len(body), err)
		}
	}
}
