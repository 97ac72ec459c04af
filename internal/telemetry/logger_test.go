package telemetry

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/hoststate"
)

// TestWarningsAreRateLimitedPerHost: during an outage every call's episode
// warns; a host's warning of one kind is logged once each 10 s, and the
// next one says how many were held back.
func TestWarningsAreRateLimitedPerHost(t *testing.T) {
	var buf bytes.Buffer
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	l := NewLogger(slog.New(slog.NewTextHandler(&buf, nil)), fake)

	for range 50 {
		l.WarnHost("10.0.0.1:5432", "pgfailover: failover", slog.String("outcome", "survived"))
		fake.Advance(100 * time.Millisecond) // 5 s in all
	}
	l.WarnHost("10.0.0.2:5432", "pgfailover: failover") // another host: its own limit
	l.WarnHost("10.0.0.1:5432", "pgfailover: probe failed")
	fake.Advance(5 * time.Second) // 10 s after the first line
	l.WarnHost("10.0.0.1:5432", "pgfailover: failover", slog.String("outcome", "survived"))

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines logged, want 4:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{
		`msg="pgfailover: failover" host=10.0.0.1:5432 outcome=survived`,
		`msg="pgfailover: failover" host=10.0.0.2:5432`,
		`msg="pgfailover: probe failed" host=10.0.0.1:5432`,
		`msg="pgfailover: failover" host=10.0.0.1:5432 outcome=survived suppressed=49`,
	} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "level=WARN") {
			t.Errorf("line %d: %s\nwant it to contain %s", i, lines[i], want)
		}
	}
}

// TestLogLines: the text of each line the Logger writes.
func TestLogLines(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(slog.New(slog.NewTextHandler(&buf, nil)), clock.NewFake(time.Unix(1_000_000, 0)))
	a := hosthealth.HostStatus{Addr: "a:5432", State: hosthealth.Healthy, Role: hosthealth.RolePrimary, Claimed: hosthealth.RolePrimary}
	b := a
	b.State, b.Role = hosthealth.TransportError, hosthealth.RoleReplica

	l.HostChange(hoststate.Change{After: a, Added: true})
	l.HostChange(hoststate.Change{Before: a, Removed: true})
	l.HostChange(hoststate.Change{Before: a, After: b})
	l.FailoverEnded("a:5432", "b:5432", 1500*time.Millisecond)
	l.FailoverEnded("a:5432", "", time.Second)
	l.Episode("a:5432", "b:5432", OutcomeSurvived, 2, 250*time.Millisecond, nil)
	l.Episode("c:5432", "", OutcomeNoHost, 1, 0, errors.New("no host"))

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`level=INFO msg="pgfailover: host added" host=a:5432 role=primary`,
		`level=INFO msg="pgfailover: host removed" host=a:5432`,
		`level=INFO msg="pgfailover: host changed" host=a:5432 state=transport-error was=healthy role=replica role_was=primary`,
		`level=INFO msg="pgfailover: failover ended" failed=a:5432 duration=1.5s host=b:5432`,
		`level=INFO msg="pgfailover: failover ended" failed=a:5432 duration=1s`,
		`level=WARN msg="pgfailover: failover" host=a:5432 outcome=survived attempts=2 waited=250ms last_host=b:5432`,
		`level=WARN msg="pgfailover: failover" host=c:5432 outcome=no_host attempts=1 waited=0s error="no host"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines logged, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("line %d: %s\nwant it to end with %s", i, lines[i], w)
		}
	}
}

// TestSilentLogger: without a *slog.Logger nothing is written, not even
// to slog's default logger, and nothing panics.
func TestSilentLogger(t *testing.T) {
	var out bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&out, nil)))
	defer func() {
		if out.Len() > 0 {
			t.Errorf("a Logger without a *slog.Logger wrote:\n%s", out.String())
		}
	}()
	for _, l := range []Logger{{}, NewLogger(nil, clock.Real())} {
		l.Info("x")
		l.Warn("k", "x")
		l.WarnHost("a:5432", "x")
		l.HostChange(hoststate.Change{Added: true})
		l.FailoverEnded("a", "b", time.Second)
		l.Episode("a", "b", OutcomeFailed, 1, 0, errors.New("x"))
	}
}
