package failover

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/telemetry"
	"github.com/pgfailover/pgfailover/patroni"
	"github.com/pgfailover/pgfailover/topology"
)

var (
	_ steerer           = localFirst{}
	_ patroni.Connector = (*hostpool.Set)(nil)
)

// localFirst is the local-first fallback (fallback_local) as the Pool's
// steerer: the connection string's first host is the local server and
// takes the Pool's calls; when it fails, calls go to a fallback host found
// by racing the cluster's synchronous standbys, then the other members.
// patroni.LocalFirst runs it, on the Pool's hosts (hostpool.Set).
type localFirst struct{ lf *patroni.LocalFirst }

func newLocalFirst(p *Pool) (localFirst, error) {
	if len(p.cfg.Hosts) == 0 {
		return localFirst{}, &ConfigError{Key: keyFallbackLocal, Msg: "needs the local server as the connection string's first host"}
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
		return localFirst{}, &ConfigError{Key: keyFallbackLocal, Msg: err.Error(), Err: err}
	}
	cfg := patroni.LocalFirstConfig{
		Fallback:   fb,
		Connector:  p.hosts,
		Life:       p.life,
		Go:         p.bg.Go,
		Meter:      p.telemetry.Meter(),
		Attributes: []attribute.KeyValue{telemetry.DBSystem},
		Logger:     p.cfg.Logger,
	}
	clock.Configure(&cfg, p.clock)
	lf, err := patroni.NewLocalFirst(cfg)
	return localFirst{lf}, err
}

func (s localFirst) choose(ctx context.Context) string             { return s.lf.Choose(ctx) }
func (s localFirst) failed(addr string, err error)                 { s.lf.Failed(addr, err) }
func (s localFirst) members(members []topology.Member)             { s.lf.SetMembers(members) }
func (s localFirst) budget(configured time.Duration) time.Duration { return s.lf.Budget(configured) }
func (s localFirst) register(metric.Meter) (metric.Registration, error) {
	return s.lf.Register() // on the Pool's meter, given at construction
}
