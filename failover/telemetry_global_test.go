package failover_test

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// TestGlobalMeterProviderRecordsPatroni: with Config.MeterProvider nil,
// the Pool records on the global provider, and so does its Patroni source:
// the requests to the API are counted there beside the Pool's own
// instruments.
func TestGlobalMeterProviderRecordsPatroni(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	ctx := testContext(t)
	cluster := fmt.Sprintf(`{"members": [{"name": "a", "role": "leader", "state": "running", "host": "127.0.0.1", "port": %d}]}`, c.Primary().Port())
	apiURL := servePatroniCluster(t, cluster)

	reader, provider := newMeter(t)
	otel.SetMeterProvider(provider)
	// Runs before newMeter's cleanup shuts the provider down. Later
	// tests find a no-op global provider, as they would have without
	// this one.
	t.Cleanup(func() { otel.SetMeterProvider(noop.NewMeterProvider()) })

	cfg, err := failover.ParseConfig(c.Primary().ConnString("patroni_api_urls=" + apiURL))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MeterProvider != nil {
		t.Fatal("ParseConfig set a MeterProvider")
	}
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the Patroni requests and the Pool's connection attempts counted on the global provider", func() bool {
		got := counters(t, ctx, reader)
		return got["pgfailover.patroni.requests"] > 0 && got["pgfailover.connection.attempts"] > 0
	})
}
