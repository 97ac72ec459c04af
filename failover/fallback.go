package failover

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/internal/telemetry"
	"github.com/pgfailover/pgfailover/patroni"
	"github.com/pgfailover/pgfailover/topology"
)

var (
	_ steerer           = localFirst{}
	_ patroni.Connector = fallbackHosts{}
)

// localFirst is the local-first fallback (fallback_local) as the Pool's
// steerer: the connection string's first host is the local server and
// takes the Pool's calls; when it fails, calls go to a fallback host found
// by racing the cluster's synchronous standbys, then the other members.
// patroni.LocalFirst runs it; fallbackHosts lends it the Pool's hosts.
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
	lf, err := patroni.NewLocalFirst(patroni.LocalFirstConfig{
		Fallback:   fb,
		Connector:  fallbackHosts{p},
		Life:       p.life,
		Go:         p.bg.Go,
		Clock:      p.clock,
		Meter:      p.telemetry.Meter(),
		Attributes: []attribute.KeyValue{telemetry.DBSystem},
		Logger:     p.cfg.Logger,
	})
	return localFirst{lf}, err
}

func (s localFirst) choose(ctx context.Context) string             { return s.lf.Choose(ctx) }
func (s localFirst) failed(addr string, err error)                 { s.lf.Failed(addr, err) }
func (s localFirst) members(members []topology.Member)             { s.lf.SetMembers(members) }
func (s localFirst) budget(configured time.Duration) time.Duration { return s.lf.Budget(configured) }
func (s localFirst) register(metric.Meter) (metric.Registration, error) {
	return s.lf.Register() // on the Pool's meter, given at construction
}

// fallbackHosts is the Pool as patroni.LocalFirst sees it: hosts to
// connect to by address.
type fallbackHosts struct{ p *Pool }

func (f fallbackHosts) Connect(ctx context.Context, addr string, timeout time.Duration) error {
	h := f.p.state.Routes().Table.ByAddr[addr]
	if h == nil { // left the Pool since the round looked
		return &HostError{Addr: addr, Err: hostpool.ErrHostNotUsable}
	}
	return f.p.hosts.TryConnect(ctx, h, timeout)
}

func (f fallbackHosts) Cut(addr string) {
	if h := f.p.state.Routes().Table.ByAddr[addr]; h != nil {
		f.p.telemetry.Closed(h.Server, telemetry.ClosedFallbackLifetime, int(h.Calls.Stat().TotalConns()))
		h.Calls.Reset()
	}
}

func (f fallbackHosts) Attrs(addr string) ([]attribute.KeyValue, bool) {
	if h := f.p.state.Routes().Table.ByAddr[addr]; h != nil {
		return h.Server.Attributes(), true
	}
	return nil, false
}
