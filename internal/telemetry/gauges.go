package telemetry

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// Observation is what the Pool's observable instruments read at one
// collection. The Pool fills it in the callback given to RegisterHosts.
type Observation struct {
	Hosts []HostView
	// PgxPool and ReaderPgxPool are the statistics of the pools that
	// follow the Pool over every host (PgxPool's and the Reader's
	// PgxPool's); nil when the pool has not been built.
	PgxPool, ReaderPgxPool *pgxpool.Stat
}

// HostView is one host of the Pool's table, as its observable
// instruments see it.
type HostView struct {
	Server Server
	Addr   string           // in its pools' db.client.connection.pool.name
	State  hosthealth.State // for the Pool's target
	Role   hosthealth.Role
	// Staleness is the upper bound on how stale the host is as a
	// replica, when StalenessKnown.
	Staleness      time.Duration
	StalenessKnown bool
	// Calls and Reads are the statistics of its pools for the Pool's
	// calls and for the Reader's reads.
	Calls, Reads *pgxpool.Stat
}

// RegisterHosts registers the callback of the Pool's observable
// instruments: each host's state (pgfailover.host.state), each replica's
// staleness bound (pgfailover.replica.staleness), and each of the Pool's
// pgxpools' statistics under OpenTelemetry's connection-pool names
// (db.client.connection.*). At each collection, observe fills in what
// they read. Unregister it at Close.
func (t *Instruments) RegisterHosts(observe func(*Observation)) (metric.Registration, error) {
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
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7); err != nil {
		return nil, err
	}
	idle, used := attribute.String("db.client.connection.state", "idle"), attribute.String("db.client.connection.state", "used")
	waited, notWaited := attribute.Bool("pgfailover.acquire.waited", true), attribute.Bool("pgfailover.acquire.waited", false)
	observePool := func(o metric.Observer, s *pgxpool.Stat, server []attribute.KeyValue, addr string, purpose Purpose) {
		base := append(server, DBSystem,
			attribute.String("db.client.connection.pool.name", t.poolName(addr, purpose)),
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
		var ob Observation
		observe(&ob)
		for _, h := range ob.Hosts {
			server := []attribute.KeyValue{h.Server.address, h.Server.port}
			o.ObserveInt64(gauge, 1, h.Server.With(
				attribute.String("pgfailover.state", h.State.String()),
				attribute.String("pgfailover.role", h.Role.String()),
			))
			if h.StalenessKnown {
				o.ObserveFloat64(stale, h.Staleness.Seconds(), h.Server.Observe())
			}
			observePool(o, h.Calls, server, h.Addr, PurposeCalls)
			observePool(o, h.Reads, server, h.Addr, PurposeReads)
		}
		// PgxPool's pools follow the Pool over every host: no server.
		if ob.PgxPool != nil {
			observePool(o, ob.PgxPool, nil, "", PurposePgxPool)
		}
		if ob.ReaderPgxPool != nil {
			observePool(o, ob.ReaderPgxPool, nil, "", PurposeReaderPgxPool)
		}
		return nil
	}, gauge, stale, count, maxConns, timeouts, acquires, waitTime)
}
