package failover

import (
	"go.opentelemetry.io/otel"

	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/patroni"
	"github.com/pgfailover/pgfailover/topology"
)

// patroniSource builds the topology source that patroni_api_urls asks
// for: GET /cluster on every URL, every patroni_refresh_interval and
// whenever the Pool asks (see refreshTopology), members outside
// patroni_allowed_hosts left out. Both run on the Pool's clock.
func (p *Pool) patroniSource() (*patroni.Source, error) {
	// The patroni package records nothing without a provider; the Pool's
	// metrics go to the global one when Config.MeterProvider is nil, and
	// so do its source's.
	mp := p.cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	clientCfg := patroni.ClientConfig{URLs: p.cfg.patroni.APIURLs, MeterProvider: mp}
	clock.Configure(&clientCfg, p.eng.Clock)
	client, err := patroni.NewClient(clientCfg)
	if err != nil {
		return nil, &ConfigError{Key: keyPatroniAPIURLs, Msg: err.Error(), Err: err}
	}
	p.patroniClient = client
	srcCfg := patroni.SourceConfig{
		Client:          client,
		RefreshInterval: p.cfg.patroni.Refresh,
		ZoneTag:         p.cfg.patroni.ZoneTag,
		AllowList:       p.cfg.patroni.Allowed,
		Logger:          p.cfg.Logger,
		MeterProvider:   mp,
	}
	clock.Configure(&srcCfg, p.eng.Clock)
	return patroni.NewSource(srcCfg)
}

// refreshTopology asks the topology source, when it can be asked, to look
// again now: a host failed, or a call waits for a usable host.
func (p *Pool) refreshTopology() {
	if r, ok := p.cfg.Topology.(topology.Refresher); ok {
		r.Refresh()
	}
}
