package failover

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/pgfailover/pgfailover/failover/internal/engine"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/telemetry"
	"github.com/pgfailover/pgfailover/patroni"
)

// newLocalFirst builds the local-first fallback (fallback_local), the
// Pool's steerer (engine.LocalFirst), from the Config, on the Pool's
// hosts, life, goroutines and meter.
func newLocalFirst(p *Pool) (engine.LocalFirst, error) {
	if len(p.cfg.Hosts) == 0 {
		return engine.LocalFirst{}, &ConfigError{Key: keyFallbackLocal, Msg: "needs the local server as the connection string's first host"}
	}
	s := p.cfg.patroni
	fb, err := patroni.NewFallback(patroni.FallbackConfig{
		Local:            p.cfg.Hosts[0].Addr(),
		Cooldown:         s.FallbackCooldown,
		ConnectTimeout:   s.FallbackConnectTimeout,
		Lifetime:         s.FallbackLifetime,
		QueryWaitTimeout: s.QueryWait,
	})
	if err != nil {
		return engine.LocalFirst{}, &ConfigError{Key: keyFallbackLocal, Msg: err.Error(), Err: err}
	}
	cfg := patroni.LocalFirstConfig{
		Fallback:   fb,
		Connector:  p.eng.Hosts,
		Life:       p.eng.Life,
		Go:         p.bg.Go,
		Meter:      p.eng.Telemetry.Meter(),
		Attributes: []attribute.KeyValue{telemetry.DBSystem},
		Logger:     p.cfg.Logger,
	}
	clock.Configure(&cfg, p.eng.Clock)
	lf, err := patroni.NewLocalFirst(cfg)
	return engine.LocalFirst{LF: lf}, err
}
