package patroni

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/topology"
)

// switchable serves whatever body it was last given, or a status error
// when the body is "".
type switchable struct {
	mu   sync.Mutex // guards body and hold; no I/O while held
	body string
	hold chan struct{} // when set, answers wait for it to close
}

// holdAnswers makes answers wait until the returned function is called.
func (s *switchable) holdAnswers() (release func()) {
	c := make(chan struct{})
	s.mu.Lock()
	s.hold = c
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.hold = nil
		s.mu.Unlock()
		close(c)
	}
}

func (s *switchable) set(body string) {
	s.mu.Lock()
	s.body = body
	s.mu.Unlock()
}

func (s *switchable) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	body, hold := s.body, s.hold
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	if body == "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	answer(body)(w, r)
}

// logBuffer collects log lines for a test.
type logBuffer struct {
	mu  sync.Mutex // guards buf; no I/O while held
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count returns how many lines contain s.
func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// harness runs a Source against a fake API on a fake clock.
type harness struct {
	t         *testing.T
	api       *fakeAPI
	transport *countingTransport
	body      *switchable
	clock     *clock.Fake
	logs      *logBuffer
	src       *Source
	updates   chan topology.Topology
	polls     int32 // requests seen by the last settle
}

const cluster3 = `{"members":[
 {"name":"a","role":"replica","state":"streaming","host":"10.0.0.1","port":5432,"tags":{"zone":"z1"}},
 {"name":"b","role":"leader","state":"running","host":"10.0.0.2","port":5432,"tags":{"zone":"z2"}},
 {"name":"c","role":"sync_standby","state":"streaming","host":"10.0.0.3","port":5432,"tags":{"zone":"z3","noloadbalance":true}}]}`

func newHarness(t *testing.T, body string, cfg SourceConfig) *harness {
	t.Helper()
	h := &harness{t: t, body: &switchable{body: body}, clock: clock.NewFake(time.Unix(1e9, 0)), logs: &logBuffer{}}
	h.api = newFakeAPI(t, h.body.serve)
	cfg.Client, h.transport = newTestClient(t, ClientConfig{URLs: []string{withUser(h.api.URL)}})
	cfg.Logger = slog.New(slog.NewTextHandler(h.logs, nil))
	cfg.clock = h.clock
	src, err := NewSource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.src = src
	return h
}

// start runs Watch until the test ends, and waits for its first read.
func (h *harness) start() {
	h.updates = make(chan topology.Topology, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- h.src.Watch(ctx, func(t topology.Topology) { h.updates <- t })
	}()
	h.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("Watch returned %v", err)
		}
	})
	h.settle()
}

// settle waits until Watch has made one more request and is waiting for
// its next timer: the read in between has been fully handled.
func (h *harness) settle() {
	h.t.Helper()
	want := h.polls + 1
	waitFor(h.t, "Watch to read /cluster and wait again", func() bool {
		return h.api.requests.Load() >= want && h.clock.Timers() == 1
	})
	h.polls = h.api.requests.Load()
}

// tick advances the clock by one refresh interval and waits for the read.
func (h *harness) tick() {
	h.clock.Advance(DefaultRefreshInterval)
	h.settle()
}

// next returns the update Watch made, or fails when it made none.
func (h *harness) next() topology.Topology {
	h.t.Helper()
	select {
	case t := <-h.updates:
		return t
	default:
		h.t.Fatal("no update")
		return topology.Topology{}
	}
}

func (h *harness) none() {
	h.t.Helper()
	select {
	case t := <-h.updates:
		h.t.Fatalf("unexpected update %+v", t)
	default:
	}
}

// describe writes a topology as "addr role zone [tags...]" lines.
func describe(t topology.Topology) string {
	var lines []string
	for _, m := range t.Members {
		line := m.Addr() + " " + m.Role.String() + " " + m.Zone + " " + m.Tags[TagRole]
		if m.NoLoadBalance {
			line += " noloadbalance"
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

func TestSourceReportsChanges(t *testing.T) {
	h := newHarness(t, cluster3, SourceConfig{})
	h.start()
	steps := []struct {
		name string
		body string
		want string // "" when nothing is reported
	}{
		{"first answer", cluster3, "10.0.0.2:5432 primary z2 leader\n" +
			"10.0.0.3:5432 replica z3 sync_standby noloadbalance\n" +
			"10.0.0.1:5432 replica z1 replica"},
		{"the same answer again", cluster3, ""},
		{"switchover", strings.NewReplacer(`"leader"`, `"replica"`, `"sync_standby"`, `"leader"`).Replace(cluster3),
			"10.0.0.3:5432 primary z3 leader noloadbalance\n" +
				"10.0.0.1:5432 replica z1 replica\n" +
				"10.0.0.2:5432 replica z2 replica"},
		// A member that stops is kept, without its claimed role.
		{"a member stops", strings.Replace(cluster3, `"state":"streaming","host":"10.0.0.1"`, `"state":"stopped","host":"10.0.0.1"`, 1),
			"10.0.0.2:5432 primary z2 leader\n" +
				"10.0.0.3:5432 replica z3 sync_standby noloadbalance\n" +
				"10.0.0.1:5432 unknown z1 replica"},
	}
	for i, st := range steps {
		if i > 0 {
			h.body.set(st.body)
			h.tick()
		}
		if st.want == "" {
			h.none()
			continue
		}
		if got := describe(h.next()); got != st.want {
			t.Fatalf("%s:\n%s\nwant:\n%s", st.name, got, st.want)
		}
	}
	// Only the first answer brought new hosts; role changes are not logged.
	if h.logs.count("msg=\"patroni: hosts changed\"") != 1 || h.logs.count("level=WARN") != 0 {
		t.Errorf("logs: %s", h.logs)
	}
}

// A Watch ended while a read hangs returns at once, its request ended.
func TestSourceWatchEndsDuringRead(t *testing.T) {
	h := newHarness(t, cluster3, SourceConfig{})
	release := h.body.holdAnswers()
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.src.Watch(ctx, func(topology.Topology) {}) }()
	waitFor(t, "the read to reach the API", func() bool { return h.api.requests.Load() == 1 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return after its context ended")
	}
	if h.transport.active.Load() != 0 {
		t.Fatal("a request still in progress after Watch returned")
	}
}

func TestSourceRanksMembers(t *testing.T) {
	body := `{"members":[
 {"name":"u","role":"witness","state":"running","host":"h1","port":1},
 {"name":"sl","role":"standby_leader","state":"running","host":"h2","port":1},
 {"name":"r","role":"replica","state":"streaming","host":"h3","port":1},
 {"name":"q","role":"quorum_standby","state":"streaming","host":"h4","port":1},
 {"name":"dead","role":"leader","state":"crashed","host":"h5","port":1},
 {"name":"s","role":"sync_standby","state":"streaming","host":"h6","port":1},
 {"name":"l","role":"master","state":"running","host":"h7","port":1},
 {"name":"dup","role":"replica","state":"streaming","host":"h7","port":1}]}`
	h := newHarness(t, body, SourceConfig{})
	h.start()
	want := "h7:1 primary  leader\n" +
		"h6:1 replica  sync_standby\n" +
		"h4:1 replica  quorum_standby\n" +
		"h3:1 replica  replica\n" +
		"h2:1 replica  standby_leader\n" +
		"h1:1 unknown  witness\n" +
		"h5:1 unknown  leader"
	if got := describe(h.next()); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if h.logs.count(`member dup skipped: its address h7:1 is taken`) != 1 {
		t.Errorf("the duplicate address was not logged: %s", h.logs)
	}
}

func TestSourceZoneTag(t *testing.T) {
	body := `{"members":[{"name":"a","role":"leader","state":"running","host":"h","port":1,"tags":{"zone":"z","az":"eu-1a"}}]}`
	h := newHarness(t, body, SourceConfig{ZoneTag: "az"})
	h.start()
	if got := h.next().Members[0].Zone; got != "eu-1a" {
		t.Fatalf("zone %q", got)
	}
}

func TestSourceUnreachable(t *testing.T) {
	h := newHarness(t, "", SourceConfig{})
	h.start()
	h.none() // nothing is reported, not even an empty topology
	const warning = "cannot read /cluster"
	if h.logs.count(warning) != 1 || strings.Contains(h.logs.String(), secret) {
		t.Fatalf("logs: %s", h.logs)
	}
	// Further failures within the minute are held back...
	for range 19 {
		h.tick()
	}
	h.none()
	if h.logs.count(warning) != 1 {
		t.Fatalf("logs: %s", h.logs)
	}
	// ...and counted in the next warning.
	h.tick()
	if h.logs.count(warning) != 2 || h.logs.count("suppressed=19") != 1 {
		t.Fatalf("logs: %s", h.logs)
	}
	h.body.set(cluster3)
	h.tick()
	if len(h.next().Members) != 3 {
		t.Fatal("no topology after recovery")
	}
	if h.logs.count("level=INFO msg=\"patroni: /cluster answers again\" failed_reads=21") != 1 {
		t.Fatalf("logs: %s", h.logs)
	}
	// An outage after a good answer leaves the last topology in force,
	// and is warned of at once: the run of failures before it ended.
	h.body.set("")
	h.tick()
	h.none()
	if h.logs.count(warning) != 3 {
		t.Fatalf("a new outage within the minute was not warned of: %s", h.logs)
	}
	h.body.set(cluster3)
	h.tick()
	h.none() // the same topology as before the outage
}

func TestSourceAllowList(t *testing.T) {
	allow, err := ParseAllowList("10.0.0.0/31, 10.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, cluster3, SourceConfig{AllowList: allow})
	h.start()
	if got := describe(h.next()); got != "10.0.0.2:5432 primary z2 leader\n10.0.0.1:5432 replica z1 replica" {
		t.Fatalf("got:\n%s", got)
	}
	const warning = "member c at 10.0.0.3:5432 skipped: not in the allow-list"
	if h.logs.count(warning) != 1 {
		t.Fatalf("logs: %s", h.logs)
	}
	h.tick()
	if h.logs.count(warning) != 1 {
		t.Fatalf("the warning was repeated within a minute: %s", h.logs)
	}

	// When no member is allowed, the last topology stays.
	h.body.set(strings.ReplaceAll(cluster3, "10.0.0.", "10.9.9."))
	h.clock.Advance(time.Minute)
	h.settle()
	h.none()
	if h.logs.count("no member of /cluster can be used; keeping the last topology") != 1 {
		t.Fatalf("logs: %s", h.logs)
	}
}

func TestSourceRefresh(t *testing.T) {
	h := newHarness(t, cluster3, SourceConfig{})
	h.src.Refresh() // before Watch: does not block, spent by the first read
	h.src.Refresh()
	h.start()
	h.next()
	if h.api.requests.Load() != 1 {
		t.Fatalf("%d requests, want 1", h.api.requests.Load())
	}
	// A Refresh reads at once, without the clock moving.
	h.src.Refresh()
	h.settle()
	// Refreshes made during a read fold into one more read.
	release := h.body.holdAnswers()
	h.src.Refresh()
	waitFor(t, "a read to start", func() bool { return h.api.requests.Load() == 3 })
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(h.src.Refresh)
	}
	wg.Wait()
	release()
	waitFor(t, "the folded read", func() bool { return h.api.requests.Load() == 4 && h.clock.Timers() == 1 })
	if len(h.src.refresh) != 0 {
		t.Fatal("a Refresh still pending after the folded read")
	}
}

func TestSourceRefreshAfterWatch(t *testing.T) {
	h := newHarness(t, cluster3, SourceConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// A Watch whose context has ended returns at once.
	if err := h.src.Watch(ctx, func(topology.Topology) {}); err != nil {
		t.Fatal(err)
	}
	h.src.Refresh()
	h.src.Refresh() // never blocks
}

func TestSourceWatchTwice(t *testing.T) {
	h := newHarness(t, cluster3, SourceConfig{})
	h.start()
	if err := h.src.Watch(context.Background(), func(topology.Topology) {}); !errors.Is(err, ErrWatching) {
		t.Fatalf("second Watch: %v", err)
	}
}

func TestSourceMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	h := newHarness(t, cluster3, SourceConfig{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	h.start()
	h.next()
	// One member leaves, two arrive.
	h.body.set(strings.Replace(cluster3, `"host":"10.0.0.1"`, `"host":"10.0.0.4"`, 1)[:len(cluster3)-2] +
		`,{"name":"d","role":"replica","state":"streaming","host":"10.0.0.5","port":5432}]}`)
	h.tick()
	h.next()
	got := collect(t, reader)
	if got["pgfailover.patroni.hosts.discovered"] != 5 || got["pgfailover.patroni.hosts.removed"] != 1 {
		t.Fatalf("metrics %v, want 5 discovered (3 then 2) and 1 removed", got)
	}
}

// TestSourceTopologyChanges: an answer that names another leader counts a
// leader change, one that names another set of addresses a members change;
// an answer that names no leader in between counts none.
func TestSourceTopologyChanges(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	h := newHarness(t, cluster3, SourceConfig{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	h.start()
	h.next()
	roles := func(a, b, c string) string { // the roles of members a, b and c
		body := strings.Replace(cluster3, `"role":"replica","state":"streaming","host":"10.0.0.1"`, `"role":"`+a+`","state":"streaming","host":"10.0.0.1"`, 1)
		body = strings.Replace(body, `"role":"leader","state":"running","host":"10.0.0.2"`, `"role":"`+b+`","state":"running","host":"10.0.0.2"`, 1)
		return strings.Replace(body, `"role":"sync_standby","state":"streaming","host":"10.0.0.3"`, `"role":"`+c+`","state":"streaming","host":"10.0.0.3"`, 1)
	}
	steps := []struct {
		name            string
		body            string
		leader, members int64 // the totals after the step
	}{
		{"the same answer", cluster3, 0, 0},
		{"a standby's role changes", roles("sync_standby", "leader", "replica"), 0, 0},
		{"switchover to c", roles("replica", "replica", "leader"), 1, 0},
		{"no leader named", roles("replica", "replica", "replica"), 1, 0},
		{"c leads again", roles("replica", "replica", "leader"), 1, 0},
		{"no leader, then a", roles("replica", "replica", "replica"), 1, 0},
		{"a leads", roles("leader", "replica", "replica"), 2, 0},
		{"a member's address changes", strings.Replace(roles("leader", "replica", "replica"), `"host":"10.0.0.3"`, `"host":"10.0.0.4"`, 1), 2, 1},
		{"a member leaves", strings.Replace(roles("leader", "replica", "replica"), `,
 {"name":"c","role":"replica","state":"streaming","host":"10.0.0.3","port":5432,"tags":{"zone":"z3","noloadbalance":true}}`, "", 1), 2, 2},
		{"the API is down", "", 2, 2},
		{"the leader leaves with it", cluster3, 3, 3},
	}
	for _, st := range steps {
		h.body.set(st.body)
		h.tick()
		got := collect(t, reader)
		if got["pgfailover.patroni.topology.changes/leader"] != st.leader || got["pgfailover.patroni.topology.changes/members"] != st.members {
			t.Fatalf("%s: %v, want %d leader and %d members changes", st.name, got, st.leader, st.members)
		}
	}
}

func TestNewSourceErrors(t *testing.T) {
	c, _ := newTestClient(t, ClientConfig{URLs: []string{"http://h"}})
	for _, cfg := range []SourceConfig{{}, {Client: c, RefreshInterval: -time.Second}} {
		if _, err := NewSource(cfg); err == nil {
			t.Errorf("NewSource(%+v) gave no error", cfg)
		}
	}
	s, err := NewSource(SourceConfig{Client: c})
	if err != nil || s.interval != DefaultRefreshInterval || s.zoneTag != DefaultZoneTag {
		t.Fatalf("defaults: %+v %v", s, err)
	}
}

// A Source is a topology.Source.
var _ topology.Source = (*Source)(nil)

// TestSourceReadLast: a standby cluster's leader is reported to read
// last; no other member is.
func TestSourceReadLast(t *testing.T) {
	body := `{"members":[
 {"name":"sl","role":"standby_leader","state":"running","host":"h1","port":1},
 {"name":"r","role":"replica","state":"streaming","host":"h2","port":1},
 {"name":"l","role":"leader","state":"running","host":"h3","port":1}]}`
	h := newHarness(t, body, SourceConfig{})
	h.start()
	for _, m := range h.next().Members {
		if want := m.Host == "h1"; m.ReadLast != want {
			t.Errorf("%s: ReadLast = %v, want %v", m.Addr(), m.ReadLast, want)
		}
	}
}
