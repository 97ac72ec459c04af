package patroni

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
)

// A reply is how the fake connector's host replies a connect.
type reply int

const (
	replyOK      reply = iota // connects in a role the target accepts
	replyRefused              // nothing listens
	replyStartup              // the server replies that it is starting up
	replyHang                 // nothing replies until the connect is cut short
	replyGate                 // connects once the test opens the gate, unless cut short first
)

var (
	errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	errStartup = &pgconn.PgError{Severity: "FATAL", Code: "57P03", Message: "the database system is starting up"}
)

// fakeConnector stands in for the pool: hosts by address that reply as
// told, with a count of connects and a record of cuts.
type fakeConnector struct {
	gate    chan struct{} // closed to let replyGate hosts connect
	timeout time.Duration // the connect timeout every connect must get

	mu       sync.Mutex // guards the fields below; no I/O while held
	replies  map[string]reply
	connects map[string]int
	cuts     []string
}

func newFakeConnector(replies map[string]reply) *fakeConnector {
	return &fakeConnector{gate: make(chan struct{}), replies: replies, connects: map[string]int{}}
}

func (c *fakeConnector) set(addr string, a reply) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replies[addr] = a
}

func (c *fakeConnector) forget(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.replies, addr)
}

func (c *fakeConnector) Connect(ctx context.Context, addr string, timeout time.Duration) error {
	if timeout != c.timeout {
		return fmt.Errorf("connect timeout %v, want the plan's %v", timeout, c.timeout)
	}
	c.mu.Lock()
	a, ok := c.replies[addr]
	c.connects[addr]++
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("connect to %s, a host the pool does not have", addr)
	}
	switch a {
	case replyRefused:
		return errRefused
	case replyStartup:
		return errStartup
	case replyHang:
		// As a real connect does, it gives up after its timeout.
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return context.DeadlineExceeded
		}
	case replyGate:
		select {
		case <-c.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (c *fakeConnector) Cut(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cuts = append(c.cuts, addr)
}

func (c *fakeConnector) Attrs(addr string) ([]attribute.KeyValue, bool) {
	c.mu.Lock()
	_, ok := c.replies[addr]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	host, _, _ := net.SplitHostPort(addr)
	return []attribute.KeyValue{attribute.String("server.address", host), attribute.Int("server.port", 5432)}, true
}

// connected returns how many connects each address got, as "addr=n"
// sorted.
func (c *fakeConnector) connected() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for addr, n := range c.connects {
		out = append(out, fmt.Sprintf("%s=%d", addr, n))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func (c *fakeConnector) cutHosts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.cuts)
}

// lfHarness is a LocalFirst on a fake clock and a fake connector, over
// fallbackMembers, with its metrics and log kept.
type lfHarness struct {
	lf     *LocalFirst
	clk    *clock.Fake
	conn   *fakeConnector
	reader *sdkmetric.ManualReader
	logs   *logBuffer
	stop   context.CancelFunc // ends Life
}

// everyCandidate replies for every member of fallbackMembers but the local
// server; the test changes the ones it cares about.
func everyCandidate(a reply) map[string]reply {
	m := map[string]reply{}
	for _, c := range fallbackMembers {
		if c.Addr() != local {
			m[c.Addr()] = a
		}
	}
	return m
}

// A round's connects are bounded in real time by the connect timeout and
// query_wait_timeout; the harness makes both an hour unless the test sets
// them, so that no connect is cut short by a slow machine.
func newLFHarness(t *testing.T, fcfg FallbackConfig, replies map[string]reply) *lfHarness {
	t.Helper()
	fcfg.ConnectTimeout = cmpOr(fcfg.ConnectTimeout, time.Hour)
	fcfg.QueryWaitTimeout = cmpOr(fcfg.QueryWaitTimeout, time.Hour)
	h := &lfHarness{
		clk:    clock.NewFake(time.Unix(1e9, 0)),
		conn:   newFakeConnector(replies),
		reader: sdkmetric.NewManualReader(),
		logs:   &logBuffer{},
	}
	life, stop := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	h.stop = stop
	t.Cleanup(func() { stop(); bg.Wait() })
	lf, err := NewLocalFirst(LocalFirstConfig{
		Fallback:   newTestFallback(t, fcfg),
		Connector:  h.conn,
		Life:       life,
		Go:         bg.Go,
		clock:      h.clk,
		Meter:      sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader)).Meter("test"),
		Attributes: []attribute.KeyValue{attribute.String("db.system.name", "postgresql")},
		Logger:     slog.New(slog.NewTextHandler(h.logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.conn.timeout = fcfg.ConnectTimeout
	h.lf = lf
	return h
}

// choose runs Choose on a goroutine of its own and returns its reply's
// channel.
func (h *lfHarness) choose(ctx context.Context) <-chan string {
	out := make(chan string, 1)
	go func() { out <- h.lf.Choose(ctx) }()
	return out
}

// points returns every data point of the named instruments, as
// "name{attributes}=value", sorted.
func (h *lfHarness) points(t *testing.T, names ...string) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []string
	add := func(name string, attrs attribute.Set, v int64) {
		out = append(out, fmt.Sprintf("%s{%s}=%d", name, attrs.Encoded(attribute.DefaultEncoder()), v))
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if !slices.Contains(names, m.Name) {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, p.Value)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// receive returns what ch delivers, failing the test after a generous
// deadline.
func receive(t *testing.T, what string, ch <-chan string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}

func TestLocalFirstUsesLocalUntilItFails(t *testing.T) {
	h := newLFHarness(t, FallbackConfig{}, everyCandidate(replyOK))
	if got := h.lf.Choose(context.Background()); got != local {
		t.Fatalf("Choose = %q, want the local server %s", got, local)
	}
	// A failure on a host that is neither the local server nor the
	// fallback host in force changes nothing.
	h.lf.Failed("rep1:5432", errRefused)
	// The server checked the credentials, so it is up.
	h.lf.Failed(local, &pgconn.PgError{Severity: "FATAL", Code: "28P01"})
	if got := h.lf.Choose(context.Background()); got != local {
		t.Fatalf("Choose after an authentication failure = %q, want the local server %s", got, local)
	}
	if got := h.conn.connected(); got != "" {
		t.Fatalf("connects %q, want none", got)
	}
}

// TestLocalFirstWaves: wave 1 (the synchronous standbys) is raced first;
// only once every one of them has failed is wave 2 raced, and its first
// to connect wins. Each failure is counted with its reason; the losers
// cut short by the winner are not.
func TestLocalFirstWaves(t *testing.T) {
	replies := everyCandidate(replyHang)
	replies["sync1:5432"] = replyRefused
	replies["quorum:5432"] = replyStartup
	replies["lead:5432"] = replyOK
	h := newLFHarness(t, FallbackConfig{}, replies)
	h.lf.Failed(local, errRefused)
	if got := receive(t, "Choose", h.choose(context.Background())); got != "lead:5432" {
		t.Fatalf("Choose = %q, want the leader, the only candidate that connects", got)
	}
	want := "deadsync:5432=1 lead:5432=1 quorum:5432=1 rep1:5432=1 rep2:5432=1 sl:5432=1 sync1:5432=1"
	if got := h.conn.connected(); got != want {
		t.Fatalf("connects %s, want %s", got, want)
	}
	wantPoints := []string{
		"pgfailover.fallback.candidate_failures{pgfailover.reason=refused,server.address=sync1,server.port=5432}=1",
		"pgfailover.fallback.candidate_failures{pgfailover.reason=startup,server.address=quorum,server.port=5432}=1",
	}
	if got := h.points(t, "pgfailover.fallback.candidate_failures"); !slices.Equal(got, wantPoints) {
		t.Fatalf("candidate failures:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantPoints, "\n"))
	}
	if logs := h.logs.String(); !strings.Contains(logs, `level=INFO msg="pgfailover: local server down; calls go to a fallback host" local=local:5432 host=lead:5432`) {
		t.Fatalf("log %q does not tell of the fallback host", logs)
	}
	// The winner takes the calls without another round.
	if got := h.lf.Choose(context.Background()); got != "lead:5432" {
		t.Fatalf("Choose again = %q", got)
	}
	if got := h.conn.connected(); got != want {
		t.Fatalf("connects %s after the second Choose, want %s", got, want)
	}
}

// TestLocalFirstRacesTheNextWaveAfterTimeouts: when every candidate of
// the first wave times out, the round goes on to the second within the
// caller's wait.
func TestLocalFirstRacesTheNextWaveAfterTimeouts(t *testing.T) {
	replies := everyCandidate(replyHang)
	replies["lead:5432"] = replyOK
	h := newLFHarness(t, FallbackConfig{ConnectTimeout: 20 * time.Millisecond}, replies)
	h.lf.Failed(local, errRefused)
	if got := receive(t, "Choose", h.choose(context.Background())); got != "lead:5432" {
		t.Fatalf("Choose = %q, want the leader of the second wave once the first timed out", got)
	}
}

// TestLocalFirstSharesOneRound: callers told to discover at the same time
// wait for one round, which connects to each candidate once.
func TestLocalFirstSharesOneRound(t *testing.T) {
	replies := everyCandidate(replyHang)
	replies["sync1:5432"] = replyGate
	h := newLFHarness(t, FallbackConfig{}, replies)
	h.lf.Failed(local, errRefused)
	const callers = 8
	var outs []<-chan string
	for range callers {
		outs = append(outs, h.choose(context.Background()))
	}
	// Every caller waits on its query_wait_timeout timer.
	waitFor(t, "every caller waiting", func() bool { return h.clk.Timers() == callers })
	close(h.conn.gate)
	for i, out := range outs {
		if got := receive(t, "Choose", out); got != "sync1:5432" {
			t.Fatalf("caller %d: Choose = %q, want sync1:5432", i, got)
		}
	}
	if got, want := h.conn.connected(), "quorum:5432=1 sync1:5432=1"; got != want {
		t.Fatalf("connects %s, want %s: one round for all", got, want)
	}
	if got := h.points(t, "pgfailover.fallback.candidate_failures"); len(got) != 0 {
		t.Fatalf("a loser cut short by the winner counted as failed: %v", got)
	}
}

// TestLocalFirstWaitIsBounded: a caller waits for a round no longer than
// query_wait_timeout, then lets the ranking choose; nor past its context
// or the pool's life.
func TestLocalFirstWaitIsBounded(t *testing.T) {
	// The local server's cooldown outlasts query_wait_timeout (an hour).
	h := newLFHarness(t, FallbackConfig{Cooldown: 24 * time.Hour}, everyCandidate(replyHang))
	h.lf.Failed(local, errRefused)
	out := h.choose(context.Background())
	waitFor(t, "the caller waiting", func() bool { return h.clk.Timers() == 1 })
	h.clk.Advance(time.Hour - time.Nanosecond)
	select {
	case got := <-out:
		t.Fatalf("Choose returned %q before query_wait_timeout", got)
	default:
	}
	h.clk.Advance(time.Nanosecond)
	if got := receive(t, "Choose", out); got != "" {
		t.Fatalf("Choose = %q after query_wait_timeout, want \"\" (the ranking chooses)", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	out = h.choose(ctx)
	waitFor(t, "the caller waiting", func() bool { return h.clk.Timers() == 1 })
	cancel()
	if got := receive(t, "Choose", out); got != "" {
		t.Fatalf("Choose = %q once its context ended", got)
	}

	out = h.choose(context.Background())
	waitFor(t, "the caller waiting", func() bool { return h.clk.Timers() == 1 })
	h.stop()
	if got := receive(t, "Choose", out); got != "" {
		t.Fatalf("Choose = %q once the pool closed", got)
	}
	// The round in flight ended with the pool's life, cut short, and
	// counted no failure.
	if got := h.points(t, "pgfailover.fallback.candidate_failures"); len(got) != 0 {
		t.Fatalf("candidates cut short by Close counted as failed: %v", got)
	}
}

// TestLocalFirstLifetime: the fallback host's connections are cut once
// they have lived fallback_lifetime, and not before.
func TestLocalFirstLifetime(t *testing.T) {
	replies := everyCandidate(replyHang)
	replies["quorum:5432"] = replyOK
	h := newLFHarness(t, FallbackConfig{Lifetime: 10 * time.Second}, replies)
	h.lf.Failed(local, errRefused)
	if got := receive(t, "Choose", h.choose(context.Background())); got != "quorum:5432" {
		t.Fatalf("Choose = %q, want quorum:5432", got)
	}
	waitFor(t, "the lifetime timer", func() bool { return h.clk.Timers() == 1 })
	h.clk.Advance(10*time.Second - time.Nanosecond)
	if h.clk.Timers() != 1 || len(h.conn.cutHosts()) != 0 {
		t.Fatalf("the lifetime timer fired before fallback_lifetime (cut %v)", h.conn.cutHosts())
	}
	h.clk.Advance(time.Nanosecond)
	waitFor(t, "the cut", func() bool { return len(h.conn.cutHosts()) == 1 })
	if got := h.conn.cutHosts(); got[0] != "quorum:5432" {
		t.Fatalf("cut %v, want quorum:5432", got)
	}
}

// TestLocalFirstWinnerFails: a failure on the fallback host in force drops
// it and starts another round, which the next caller finds done or waits
// for; the failed host sits out its cooldown.
func TestLocalFirstWinnerFails(t *testing.T) {
	replies := everyCandidate(replyHang)
	replies["sync1:5432"] = replyOK
	h := newLFHarness(t, FallbackConfig{}, replies)
	h.lf.Failed(local, errRefused)
	if got := receive(t, "Choose", h.choose(context.Background())); got != "sync1:5432" {
		t.Fatalf("Choose = %q, want sync1:5432", got)
	}
	h.conn.set("quorum:5432", replyOK)
	h.lf.Failed("sync1:5432", errRefused)
	if got := receive(t, "Choose", h.choose(context.Background())); got != "quorum:5432" {
		t.Fatalf("Choose after the fallback host failed = %q, want quorum:5432", got)
	}
	if got, want := h.conn.connected(), "quorum:5432=2 sync1:5432=1"; got != want {
		t.Fatalf("connects %s, want %s: the failed host skipped", got, want)
	}
}

// TestLocalFirstPassesOverUnknownHosts: a member the pool has no host for
// is neither connected to nor counted.
func TestLocalFirstPassesOverUnknownHosts(t *testing.T) {
	replies := everyCandidate(replyHang)
	replies["quorum:5432"] = replyOK
	h := newLFHarness(t, FallbackConfig{}, replies)
	h.conn.forget("sync1:5432")
	h.lf.Failed(local, errRefused)
	if got := receive(t, "Choose", h.choose(context.Background())); got != "quorum:5432" {
		t.Fatalf("Choose = %q, want quorum:5432", got)
	}
	if got, want := h.conn.connected(), "quorum:5432=1"; got != want {
		t.Fatalf("connects %s, want %s", got, want)
	}
}

// TestLocalFirstGauges: pgfailover.fallback.active is 0 until a fallback
// host is in force, then 1; pgfailover.fallback.host names that host, with
// the pool's attributes for it, or only its address once the pool has it
// no more.
func TestLocalFirstGauges(t *testing.T) {
	replies := everyCandidate(replyHang)
	replies["sync1:5432"] = replyOK
	h := newLFHarness(t, FallbackConfig{}, replies)
	reg, err := h.lf.Register()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	gauges := func() string {
		return strings.Join(h.points(t, "pgfailover.fallback.active", "pgfailover.fallback.host"), " ")
	}
	if got, want := gauges(), "pgfailover.fallback.active{db.system.name=postgresql}=0"; got != want {
		t.Fatalf("before a fallback: %s, want %s", got, want)
	}
	h.lf.Failed(local, errRefused)
	receive(t, "Choose", h.choose(context.Background()))
	want := "pgfailover.fallback.active{db.system.name=postgresql}=1 pgfailover.fallback.host{server.address=sync1,server.port=5432}=1"
	if got := gauges(); got != want {
		t.Fatalf("with a fallback host: %s, want %s", got, want)
	}
	h.conn.forget("sync1:5432")
	want = "pgfailover.fallback.active{db.system.name=postgresql}=1 pgfailover.fallback.host{db.system.name=postgresql,server.address=sync1:5432}=1"
	if got := gauges(); got != want {
		t.Fatalf("with a fallback host the pool no longer has: %s, want %s", got, want)
	}
	// The local server's cooldown ends: back to it.
	h.clk.Advance(DefaultFallbackCooldown)
	if got, want := gauges(), "pgfailover.fallback.active{db.system.name=postgresql}=0"; got != want {
		t.Fatalf("after the local server's cooldown: %s, want %s", got, want)
	}
}

func TestLocalFirstBudget(t *testing.T) {
	h := newLFHarness(t, FallbackConfig{QueryWaitTimeout: 3 * time.Second}, nil)
	for _, tt := range []struct{ configured, want time.Duration }{
		{10 * time.Second, 3 * time.Second},
		{time.Second, time.Second},
	} {
		if got := h.lf.Budget(tt.configured); got != tt.want {
			t.Errorf("Budget(%v) = %v, want %v", tt.configured, got, tt.want)
		}
	}
}

func TestNewLocalFirstNeedsItsParts(t *testing.T) {
	fb, err := NewFallback(FallbackConfig{Local: local})
	if err != nil {
		t.Fatal(err)
	}
	full := LocalFirstConfig{Fallback: fb, Connector: newFakeConnector(nil), Life: context.Background(), Go: func(func()) {}}
	if _, err := NewLocalFirst(full); err != nil {
		t.Fatalf("a complete config: %v", err)
	}
	for name, drop := range map[string]func(*LocalFirstConfig){
		"Fallback":  func(c *LocalFirstConfig) { c.Fallback = nil },
		"Connector": func(c *LocalFirstConfig) { c.Connector = nil },
		"Life":      func(c *LocalFirstConfig) { c.Life = nil },
		"Go":        func(c *LocalFirstConfig) { c.Go = nil },
	} {
		cfg := full
		drop(&cfg)
		if _, err := NewLocalFirst(cfg); err == nil {
			t.Errorf("no error without %s", name)
		}
	}
}

func TestReasonOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Reason
	}{
		{"connection refused", fmt.Errorf("dial: %w", errRefused), ReasonRefused},
		{"connect timed out", fmt.Errorf("connect: %w", context.DeadlineExceeded), ReasonTimeout},
		{"wrong password", &pgconn.PgError{Code: "28P01"}, ReasonAuth},
		{"no such role", &pgconn.PgError{Code: "28000"}, ReasonAuth},
		{"starting up", errStartup, ReasonStartup},
		{"too many clients", &pgconn.PgError{Code: "53300"}, ReasonStartup},
		{"in a role the target does not take", &hosthealth.RoleError{Addr: "rep1:5432"}, ReasonStartup},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), ReasonSocket},
		{"end of file", io.ErrUnexpectedEOF, ReasonSocket},
		{"something else", errors.New("tls: handshake failure"), ReasonSocket},
	}
	for _, tt := range tests {
		if got := ReasonOf(tt.err); got != tt.want {
			t.Errorf("%s: ReasonOf(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}
