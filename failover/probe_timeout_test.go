package failover

import (
	"testing"
	"time"
)

// TestProbeTimeout: a probe's connect is bounded by connect_timeout, and
// by 5s when connect_timeout=0 (no limit for the Pool's connections), so a
// probe never hangs. ParseConfig sets both.
func TestProbeTimeout(t *testing.T) {
	clearPGEnv(t)
	for _, tc := range []struct {
		conn        string
		connect     time.Duration // ConnConfig.ConnectTimeout
		probeBounds time.Duration
	}{
		{"host=db-a", 5 * time.Second, 5 * time.Second},
		{"host=db-a connect_timeout=2", 2 * time.Second, 2 * time.Second},
		{"host=db-a connect_timeout=0", 0, 5 * time.Second},
	} {
		cfg := mustParse(t, tc.conn)
		if got := cfg.ConnConfig.ConnectTimeout; got != tc.connect {
			t.Errorf("%s: ConnectTimeout = %v, want %v", tc.conn, got, tc.connect)
		}
		p := &Pool{cfg: cfg}
		if got := p.probeTimeout(); got != tc.probeBounds {
			t.Errorf("%s: a probe's connect is bounded by %v, want %v", tc.conn, got, tc.probeBounds)
		}
	}
}
