package telemetry

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/replica"
)

// recorded is Instruments on a manual reader and a span recorder, on a
// fake clock.
type recorded struct {
	*Instruments
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	clock  *clock.Fake
}

func newRecorded(t *testing.T) recorded {
	t.Helper()
	r := recorded{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder(), clock: clock.NewFake(time.Unix(1_000_000, 0))}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	t.Cleanup(func() {
		mp.Shutdown(context.Background())
		tp.Shutdown(context.Background())
	})
	var err error
	r.Instruments, err = New(Config{MeterProvider: mp, TracerProvider: tp, Clock: r.clock, Database: "app"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// point is one data point: its value and its attributes as key=value.
type point struct {
	value float64
	attrs []string
}

// points returns every data point of the metric named name.
func (r recorded) points(t *testing.T, name string) []point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []point
	add := func(v float64, set attribute.Set) {
		var attrs []string
		for _, kv := range set.ToSlice() {
			attrs = append(attrs, string(kv.Key)+"="+kv.Value.String())
		}
		out = append(out, point{v, attrs})
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					add(float64(dp.Value), dp.Attributes)
				}
			case metricdata.Sum[float64]:
				for _, dp := range d.DataPoints {
					add(dp.Value, dp.Attributes)
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					add(float64(dp.Value), dp.Attributes)
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					add(dp.Value, dp.Attributes)
				}
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					add(float64(dp.Sum), dp.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					add(dp.Sum, dp.Attributes)
				}
			default:
				t.Fatalf("%s: data of type %T", name, m.Data)
			}
		}
	}
	return out
}

// one returns the value of the one point of name with every attribute of
// want, and fails unless there is exactly one.
func (r recorded) one(t *testing.T, name string, want ...string) float64 {
	t.Helper()
	var found []point
	for _, p := range r.points(t, name) {
		if !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(p.attrs, w) }) {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d points with %v, want 1: %v", name, len(found), want, r.points(t, name))
	}
	return found[0].value
}

func TestOutcomeNames(t *testing.T) {
	for o, want := range map[CallOutcome]string{
		OutcomeSurvived:             "survived",
		OutcomeCommitOutcomeUnknown: "commit_outcome_unknown",
		OutcomeNoHost:               "no_host",
		OutcomeBudgetExhausted:      "budget_exhausted",
		OutcomeFailed:               "failed",
		numOutcomes:                 "unknown",
	} {
		if got := o.String(); got != want {
			t.Errorf("CallOutcome(%d) is %q, want %q", o, got, want)
		}
	}
}

// TestCallCounters: a survived call counts under survived with
// db.system.name alone; a failed one under failed with its outcome; the
// attempts histogram carries the outcome either way.
func TestCallCounters(t *testing.T) {
	r := newRecorded(t)
	ctx := context.Background()
	r.Counted(ctx, OutcomeSurvived)
	r.Counted(ctx, OutcomeNoHost)
	r.Counted(ctx, OutcomeNoHost)
	r.Counted(ctx, OutcomeCommitOutcomeUnknown)

	if got := r.points(t, "pgfailover.failover.survived"); len(got) != 1 || got[0].value != 1 || !slices.Equal(got[0].attrs, []string{"db.system.name=postgresql"}) {
		t.Errorf("survived: %v, want one point of 1 with db.system.name alone", got)
	}
	if n := r.one(t, "pgfailover.failover.failed", "pgfailover.outcome=no_host", "db.system.name=postgresql"); n != 2 {
		t.Errorf("failed no_host = %v, want 2", n)
	}
	if n := r.one(t, "pgfailover.failover.failed", "pgfailover.outcome=commit_outcome_unknown"); n != 1 {
		t.Errorf("failed commit_outcome_unknown = %v, want 1", n)
	}

	span := r.StartEpisode(ctx)
	r.HostFailed(span, NewServer("10.0.0.1", 5432), hosthealth.Transport, errors.New("connection refused"))
	r.Waited(ctx, span, 1500*time.Millisecond)
	r.EndEpisode(ctx, span, 3, OutcomeBudgetExhausted, errors.New("out of time"))
	if n := r.one(t, "pgfailover.call.attempts", "pgfailover.outcome=budget_exhausted"); n != 3 {
		t.Errorf("attempts = %v, want 3", n)
	}
	if s := r.one(t, "pgfailover.failover.wait", "db.system.name=postgresql"); s != 1.5 {
		t.Errorf("wait = %v s, want 1.5", s)
	}
	ended := r.spans.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	sp := ended[0]
	if sp.Name() != "pgfailover.failover" || sp.Status().Description != "out of time" {
		t.Errorf("span %q with status %v", sp.Name(), sp.Status())
	}
	var events []string
	for _, e := range sp.Events() {
		events = append(events, e.Name)
	}
	if !slices.Equal(events, []string{"host failed", "waited for a usable host"}) {
		t.Errorf("span events %v", events)
	}
	if !slices.Contains(sp.Attributes(), attribute.String("pgfailover.outcome", "budget_exhausted")) {
		t.Errorf("span attributes %v lack the outcome", sp.Attributes())
	}
}

// TestHostCounters: connections closed, probes, connection opens and the
// end of a failover are recorded against the host's attributes.
func TestHostCounters(t *testing.T) {
	r := newRecorded(t)
	s := NewServer("10.0.0.1", 5432)
	host := []string{"db.system.name=postgresql", "server.address=10.0.0.1", "server.port=5432"}

	r.Closed(s, ClosedDemoted, 3)
	r.Closed(s, ClosedRemoved, 0) // nothing to count
	if n := r.one(t, "pgfailover.connection.closed", append(host, "pgfailover.close.reason=demoted")...); n != 3 {
		t.Errorf("closed demoted = %v, want 3", n)
	}
	if got := r.points(t, "pgfailover.connection.closed"); len(got) != 1 {
		t.Errorf("closed: %v, want only the demoted point", got)
	}

	r.Probed(s, nil)
	r.Probed(s, errors.New("boom"))
	if n := r.one(t, "pgfailover.probes", append(host, "pgfailover.probe.outcome=ok")...); n != 1 {
		t.Errorf("probes ok = %v, want 1", n)
	}
	if got := r.points(t, "pgfailover.probes"); len(got) != 2 {
		t.Errorf("probes: %v, want an ok point and a failure point", got)
	}

	opened := r.Connecting(s, "10.0.0.1:5432", PurposeReads)
	r.clock.Advance(250 * time.Millisecond)
	opened()
	if n := r.one(t, "pgfailover.connection.attempts", append(host, "pgfailover.pool.purpose=reads")...); n != 1 {
		t.Errorf("attempts = %v, want 1", n)
	}
	if d := r.one(t, "db.client.connection.create_time", append(host, "pgfailover.pool.purpose=reads", "db.client.connection.pool.name=10.0.0.1:5432/app/reads")...); d != 0.25 {
		t.Errorf("create_time = %v s, want 0.25 on the injected clock", d)
	}

	r.FailoverEnded(s, 2*time.Second)
	if d := r.one(t, "pgfailover.failover.duration", host...); d != 2 {
		t.Errorf("duration = %v s, want 2", d)
	}
}

// TestReadRouted: each reason counts under its destination.
func TestReadRouted(t *testing.T) {
	r := newRecorded(t)
	for reason := range replica.Reason(replica.NumReasons) {
		r.ReadRouted(context.Background(), reason)
	}
	for reason := range replica.Reason(replica.NumReasons) {
		dest := "pgfailover.destination=primary"
		if reason.OnReplica() {
			dest = "pgfailover.destination=replica"
		}
		if n := r.one(t, "pgfailover.reads", dest, "pgfailover.reason="+reason.String()); n != 1 {
			t.Errorf("reads %s = %v, want 1", reason, n)
		}
	}
}

// TestRecordingAllocatesNothing: the Reader's count of each read, which
// runs on calls that meet no failover event, allocates nothing.
func TestRecordingAllocatesNothing(t *testing.T) {
	tel, err := New(Config{MeterProvider: noop.NewMeterProvider()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { tel.ReadRouted(ctx, replica.Eligible) }); n != 0 {
		t.Errorf("ReadRouted allocates %v times, want 0", n)
	}
}

// TestHostGauges: the callback reports what the Pool hands it: each
// host's state and role, the staleness only when known, and each pool's
// statistics under its name.
func TestHostGauges(t *testing.T) {
	r := newRecorded(t)
	// A pgxpool connects nothing until asked for a connection: its
	// statistics are all zero.
	pool, err := pgxpool.New(context.Background(), "postgres://app@127.0.0.1:1/app")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	a, b := NewServer("10.0.0.1", 5432), NewServer("10.0.0.2", 5432)
	reg, err := r.RegisterHosts(func(ob *Observation) {
		ob.Hosts = []HostView{
			{Server: a, Addr: "10.0.0.1:5432", State: hosthealth.Healthy, Role: hosthealth.RolePrimary, Calls: pool.Stat(), Reads: pool.Stat()},
			{Server: b, Addr: "10.0.0.2:5432", State: hosthealth.Healthy, Role: hosthealth.RoleReplica, Staleness: 3 * time.Second, StalenessKnown: true, Calls: pool.Stat(), Reads: pool.Stat()},
		}
		ob.ReaderPgxPool = pool.Stat()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()

	r.one(t, "pgfailover.host.state", "server.address=10.0.0.1", "pgfailover.role=primary", "pgfailover.state="+hosthealth.Healthy.String())
	r.one(t, "pgfailover.host.state", "server.address=10.0.0.2", "pgfailover.role=replica")
	if got := r.points(t, "pgfailover.replica.staleness"); len(got) != 1 || got[0].value != 3 || !slices.Contains(got[0].attrs, "server.address=10.0.0.2") {
		t.Errorf("staleness %v, want 3 s for 10.0.0.2 alone", got)
	}
	var names []string
	for _, p := range r.points(t, "db.client.connection.max") {
		for _, a := range p.attrs {
			if name, ok := strings.CutPrefix(a, "db.client.connection.pool.name="); ok {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	want := []string{"10.0.0.1:5432/app/calls", "10.0.0.1:5432/app/reads", "10.0.0.2:5432/app/calls", "10.0.0.2:5432/app/reads", "app/reader_pgxpool"}
	if !slices.Equal(names, want) {
		t.Errorf("pools %v, want %v", names, want)
	}
	r.one(t, "pgfailover.pool.acquires", "db.client.connection.pool.name=app/reader_pgxpool", "pgfailover.pool.purpose=reader_pgxpool", "pgfailover.acquire.waited=true")
}
