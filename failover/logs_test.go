package failover

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/lograte"
)

// TestWarningsAreRateLimitedPerHost: during an outage every call's episode
// warns; a host's warning of one kind is logged once each 10 s, and the
// next one says how many were held back.
func TestWarningsAreRateLimitedPerHost(t *testing.T) {
	var buf bytes.Buffer
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	p := &Pool{cfg: &Config{Logger: slog.New(slog.NewTextHandler(&buf, nil))}, warnings: lograte.New(warnEvery, fake)}

	for range 50 {
		p.warnHost("10.0.0.1:5432", "pgfailover: failover", slog.String("outcome", "survived"))
		fake.Advance(100 * time.Millisecond) // 5 s in all
	}
	p.warnHost("10.0.0.2:5432", "pgfailover: failover") // another host: its own limit
	p.warnHost("10.0.0.1:5432", "pgfailover: probe failed")
	fake.Advance(5 * time.Second) // 10 s after the first line
	p.warnHost("10.0.0.1:5432", "pgfailover: failover", slog.String("outcome", "survived"))

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
