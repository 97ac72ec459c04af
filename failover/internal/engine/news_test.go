package engine

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/telemetry"
)

// TestFailoverDurationAndHostChanges: the engine's routing state, rebuilt
// after each observation, logs each host change once and measures the time
// the target had no usable host, on the engine's clock.
func TestFailoverDurationAndHostChanges(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	reader := sdkmetric.NewManualReader()
	tel, err := telemetry.New(telemetry.Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), Clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	e := &Engine{
		Settings:  Settings{Target: hosthealth.TargetPrimary},
		Clock:     fake,
		Telemetry: tel,
		Log:       telemetry.NewLogger(slog.New(slog.NewTextHandler(&logs, nil)), fake),
	}
	newMemState(e)
	hosts := []hosthealth.HostSpec{{Addr: "10.0.0.1:5432"}, {Addr: "10.0.0.2:5432"}}
	setMemHosts(e, hosts, func(i int, addr string) *hostpool.Host {
		return &hostpool.Host{Addr: addr, Server: telemetry.NewServer("10.0.0."+string(rune('1'+i)), 5432)}
	})
	memAnswer(e, hosts[0].Addr, hosthealth.RolePrimary)
	memAnswer(e, hosts[1].Addr, hosthealth.RoleReplica)

	fake.Advance(time.Second)
	memFail(e, hosts[0].Addr, hosthealth.Transport)
	memFail(e, hosts[0].Addr, hosthealth.Transport) // the same news again
	fake.Advance(1500 * time.Millisecond)
	memAnswer(e, hosts[1].Addr, hosthealth.RolePrimary)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "pgfailover.failover.duration" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				if addr, _ := dp.Attributes.Value("server.address"); addr.AsString() != "10.0.0.1" {
					t.Errorf("duration recorded for %v, want the host that failed", dp.Attributes.ToSlice())
				}
				got = append(got, dp.Sum)
			}
		}
	}
	if len(got) != 1 || got[0] != 1.5 {
		t.Errorf("failover durations %v, want one of 1.5 s", got)
	}

	text := logs.String()
	for _, want := range []string{
		`msg="pgfailover: host changed" host=10.0.0.1:5432 state=transport-error was=healthy role=primary role_was=primary`,
		`msg="pgfailover: host changed" host=10.0.0.2:5432 state=healthy was=healthy role=primary role_was=replica`,
		`msg="pgfailover: failover ended" failed=10.0.0.1:5432 duration=1.5s host=10.0.0.2:5432`,
	} {
		if n := strings.Count(text, want); n != 1 {
			t.Errorf("logged %d times, want once: %s\nlog:\n%s", n, want, text)
		}
	}
	if strings.Contains(text, "host added") {
		t.Errorf("the first host table logged hosts as added:\n%s", text)
	}
}
