package failover

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// serverAttrs are a host's attributes on metric points, in OpenTelemetry's
// names: server.address and server.port, with db.system.name. Built once
// per host.
type serverAttrs struct {
	address, port attribute.KeyValue
	set           attribute.Set
}

func newServerAttrs(h Host) serverAttrs {
	s := serverAttrs{
		address: attribute.String("server.address", h.Host),
		port:    attribute.Int("server.port", int(h.Port)),
	}
	s.set = attribute.NewSet(dbSystem, s.address, s.port)
	return s
}

// with returns the host's attributes and kv, as one option.
func (s serverAttrs) with(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append([]attribute.KeyValue{dbSystem, s.address, s.port}, kv...)...)
}

// closeReason says why the Pool closed connections: a value of
// pgfailover.close.reason.
type closeReason string

const (
	closedDemoted          closeReason = "demoted"           // the host is now in a role the target does not accept
	closedByServer         closeReason = "closed_by_server"  // the server ended the idle session (a FATAL or end-of-file was waiting)
	closedWrongRole        closeReason = "wrong_role"        // the session reported a role change while idle
	closedNotPromoted      closeReason = "not_promoted"      // opened ahead of a promotion of its host that did not come
	closedSilentHost       closeReason = "silent_host"       // the host stopped answering: its sockets were cut
	closedFallbackLifetime closeReason = "fallback_lifetime" // a fallback host's connections lived fallback_lifetime
	closedRemoved          closeReason = "removed"           // the host left the topology
)

// closed counts n connections of host h closed for reason.
func (t *telemetry) closed(h *hostPool, reason closeReason, n int) {
	if n > 0 {
		t.connClosed.Add(context.Background(), int64(n), h.server.with(attribute.String("pgfailover.close.reason", string(reason))))
	}
}

// openConns is the number of connections of host h's own pools.
func (h *hostPool) openConns() int {
	return int(h.pool.Stat().TotalConns() + h.reads.Stat().TotalConns())
}

// probed counts one probe of host h with its outcome.
func (t *telemetry) probed(h *hostPool, err error) {
	outcome := "ok"
	if err != nil {
		outcome = hosthealth.Classify(err).String()
	}
	t.probes.Add(context.Background(), 1, h.server.with(attribute.String("pgfailover.probe.outcome", outcome)))
}

// poolPurpose names what one of the Pool's pgxpools is for: a value of
// pgfailover.pool.purpose.
type poolPurpose string

const (
	purposeCalls         poolPurpose = "calls"          // a host's pool for the Pool's calls
	purposeReads         poolPurpose = "reads"          // a host's pool for the Reader's reads
	purposePgxPool       poolPurpose = "pgxpool"        // PgxPool()'s pool, over every host
	purposeReaderPgxPool poolPurpose = "reader_pgxpool" // Reader().PgxPool()'s pool
)

// connecting counts a connection a pool of host h began to open, and
// returns what to call once it is open (and has passed the role check).
func (p *Pool) connecting(h *hostPool, purpose poolPurpose) (opened func()) {
	attrs := h.server.with(attribute.String("pgfailover.pool.purpose", string(purpose)))
	p.telemetry.connAttempts.Add(context.Background(), 1, attrs)
	start := p.clock.Now()
	return func() {
		name := attribute.String("db.client.connection.pool.name", p.poolName(h.addr, purpose))
		p.telemetry.connCreate.Record(context.Background(), p.clock.Now().Sub(start).Seconds(),
			h.server.with(name, attribute.String("pgfailover.pool.purpose", string(purpose))))
	}
}

// poolName is the db.client.connection.pool.name of a pool: the host, the
// database, and what the pool is for.
func (p *Pool) poolName(addr string, purpose poolPurpose) string {
	return addr + "/" + p.cfg.ConnConfig.Database + "/" + string(purpose)
}

// registerHosts registers the callback of the Pool's observable
// instruments: each host's state (pgfailover.host.state), each replica's
// staleness bound (pgfailover.replica.staleness), and each of the Pool's
// pgxpools' statistics under OpenTelemetry's connection-pool names
// (db.client.connection.*). Unregister it at Close.
func (t *telemetry) registerHosts(p *Pool) (metric.Registration, error) {
	m := t.meter
	gauge, err1 := m.Int64ObservableGauge("pgfailover.host.state",
		metric.WithDescription("Each host the Pool knows, with its state for the Pool's target and its role; always 1."),
		metric.WithUnit("{host}"))
	stale, err2 := m.Float64ObservableGauge("pgfailover.replica.staleness",
		metric.WithDescription("Upper bound on how stale each replica is: the age of the newest primary WAL sample it has replayed. Absent while unknown."),
		metric.WithUnit("s"))
	count, err3 := m.Int64ObservableUpDownCounter("db.client.connection.count",
		metric.WithDescription("Connections of each pool, by state: idle or used."),
		metric.WithUnit("{connection}"))
	maxConns, err4 := m.Int64ObservableUpDownCounter("db.client.connection.max",
		metric.WithDescription("The most connections each pool may open."),
		metric.WithUnit("{connection}"))
	timeouts, err5 := m.Int64ObservableCounter("db.client.connection.timeouts",
		metric.WithDescription("Acquires from each pool that ended with their context before a connection came."),
		metric.WithUnit("{timeout}"))
	acquires, err6 := m.Int64ObservableCounter("pgfailover.pool.acquires",
		metric.WithDescription("Connections acquired from each pool, by whether the acquire had to wait for one (pgfailover.acquire.waited)."),
		metric.WithUnit("{acquire}"))
	waitTime, err7 := m.Float64ObservableCounter("pgfailover.pool.acquire.wait_time",
		metric.WithDescription("Total time acquires from each pool waited for a connection, when none was idle."),
		metric.WithUnit("s"))
	if err := firstError(err1, err2, err3, err4, err5, err6, err7); err != nil {
		return nil, err
	}
	idle, used := attribute.String("db.client.connection.state", "idle"), attribute.String("db.client.connection.state", "used")
	waited, notWaited := attribute.Bool("pgfailover.acquire.waited", true), attribute.Bool("pgfailover.acquire.waited", false)
	observePool := func(o metric.Observer, s *pgxpool.Stat, server []attribute.KeyValue, name string, purpose poolPurpose) {
		base := append(server, dbSystem,
			attribute.String("db.client.connection.pool.name", name),
			attribute.String("pgfailover.pool.purpose", string(purpose)))
		with := func(kv ...attribute.KeyValue) metric.ObserveOption {
			return metric.WithAttributes(append(base[:len(base):len(base)], kv...)...)
		}
		o.ObserveInt64(count, int64(s.IdleConns()), with(idle))
		o.ObserveInt64(count, int64(s.AcquiredConns()), with(used))
		o.ObserveInt64(maxConns, int64(s.MaxConns()), with())
		o.ObserveInt64(timeouts, s.CanceledAcquireCount(), with())
		o.ObserveInt64(acquires, s.EmptyAcquireCount(), with(waited))
		o.ObserveInt64(acquires, s.AcquireCount()-s.EmptyAcquireCount(), with(notWaited))
		o.ObserveFloat64(waitTime, s.EmptyAcquireWaitTime().Seconds(), with())
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		rs := p.state.Routes()
		s := rs.Health
		now := p.clock.Now()
		for i := range s.Len() {
			h := s.Host(i)
			hp := rs.Hosts[i].Pool
			if hp == nil {
				continue // its pool could not be built: not in the table
			}
			server := []attribute.KeyValue{hp.server.address, hp.server.port}
			o.ObserveInt64(gauge, 1, metric.WithAttributes(dbSystem, hp.server.address, hp.server.port,
				attribute.String("pgfailover.state", s.State(i, p.cfg.Target).String()),
				attribute.String("pgfailover.role", h.Role.String()),
			))
			if bound, ok := rs.Hosts[i].Fresh.Staleness(now); ok {
				o.ObserveFloat64(stale, bound.Seconds(), hp.server.observe())
			}
			observePool(o, hp.pool.Stat(), server, p.poolName(hp.addr, purposeCalls), purposeCalls)
			observePool(o, hp.reads.Stat(), server, p.poolName(hp.addr, purposeReads), purposeReads)
		}
		// PgxPool's pools follow the Pool over every host: no server.
		if f := p.follower(); f != nil {
			observePool(o, f.pool.Stat(), nil, p.cfg.ConnConfig.Database+"/"+string(purposePgxPool), purposePgxPool)
		}
		if f := p.reader.follow.Load(); f != nil {
			observePool(o, f.pool.Stat(), nil, p.cfg.ConnConfig.Database+"/"+string(purposeReaderPgxPool), purposeReaderPgxPool)
		}
		return nil
	}, gauge, stale, count, maxConns, timeouts, acquires, waitTime)
}

// observe is the host's attributes, for an observation.
func (s serverAttrs) observe() metric.ObserveOption { return metric.WithAttributeSet(s.set) }

// firstError returns the first non-nil error of errs.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
