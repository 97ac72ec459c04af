package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// Server is a host's attributes on metric points, in OpenTelemetry's
// names: server.address and server.port, with db.system.name. Built once
// per host, by NewServer.
type Server struct {
	address, port attribute.KeyValue
	set           attribute.Set
}

// NewServer returns the attributes of the host at host and port.
func NewServer(host string, port uint16) Server {
	s := Server{
		address: attribute.String("server.address", host),
		port:    attribute.Int("server.port", int(port)),
	}
	s.set = attribute.NewSet(DBSystem, s.address, s.port)
	return s
}

// With returns the host's attributes and kv, as one option.
func (s Server) With(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append([]attribute.KeyValue{DBSystem, s.address, s.port}, kv...)...)
}

// Attributes returns the host's attributes, db.system.name included.
func (s Server) Attributes() []attribute.KeyValue { return s.set.ToSlice() }

// Observe is the host's attributes, for an observation.
func (s Server) Observe() metric.ObserveOption { return metric.WithAttributeSet(s.set) }

// CloseReason says why the Pool closed connections: a value of
// pgfailover.close.reason.
type CloseReason string

const (
	ClosedDemoted          CloseReason = "demoted"           // the host is now in a role the target does not accept
	ClosedByServer         CloseReason = "closed_by_server"  // the server ended the idle session (a FATAL or end-of-file was waiting)
	ClosedWrongRole        CloseReason = "wrong_role"        // the session reported a role change while idle
	ClosedNotPromoted      CloseReason = "not_promoted"      // opened ahead of a promotion of its host that did not come
	ClosedSilentHost       CloseReason = "silent_host"       // the host stopped answering: its sockets were cut
	ClosedFallbackLifetime CloseReason = "fallback_lifetime" // a fallback host's connections lived fallback_lifetime
	ClosedRemoved          CloseReason = "removed"           // the host left the topology
	ClosedReadWrite        CloseReason = "read_write"        // a Reader session whose read-only default the application turned off
	ClosedSurplus          CloseReason = "surplus"           // lent to the probe while a call opened another: the pool's size before the loan is kept
)

// Closed counts n connections of host s closed for reason.
func (t *Instruments) Closed(s Server, reason CloseReason, n int) {
	if n > 0 {
		t.connClosed.Add(context.Background(), int64(n), s.With(attribute.String("pgfailover.close.reason", string(reason))))
	}
}

// Probed counts one probe of host s, which failed with err (nil: it
// answered).
func (t *Instruments) Probed(s Server, err error) {
	outcome := "ok"
	if err != nil {
		outcome = hosthealth.Classify(err).String()
	}
	t.probes.Add(context.Background(), 1, s.With(attribute.String("pgfailover.probe.outcome", outcome)))
}

// Purpose names what one of the Pool's pgxpools is for: a value of
// pgfailover.pool.purpose.
type Purpose string

const (
	PurposeCalls         Purpose = "calls"          // a host's pool for the Pool's calls
	PurposeReads         Purpose = "reads"          // a host's pool for the Reader's reads
	PurposePgxPool       Purpose = "pgxpool"        // PgxPool()'s pool, over every host
	PurposeReaderPgxPool Purpose = "reader_pgxpool" // Reader().PgxPool()'s pool
)

// Connecting counts a connection that a pool of the host s, at addr,
// began to open, and returns what to call once it is open (and has passed
// the role check).
func (t *Instruments) Connecting(s Server, addr string, purpose Purpose) (opened func()) {
	attrs := s.With(attribute.String("pgfailover.pool.purpose", string(purpose)))
	t.connAttempts.Add(context.Background(), 1, attrs)
	start := t.clock.Now()
	return func() {
		name := attribute.String("db.client.connection.pool.name", t.poolName(addr, purpose))
		t.connCreate.Record(context.Background(), t.clock.Now().Sub(start).Seconds(),
			s.With(name, attribute.String("pgfailover.pool.purpose", string(purpose))))
	}
}

// poolName is the db.client.connection.pool.name of a pool: the host (""
// for a pool over every host), the database, and what the pool is for.
func (t *Instruments) poolName(addr string, purpose Purpose) string {
	if addr == "" {
		return t.database + "/" + string(purpose)
	}
	return addr + "/" + t.database + "/" + string(purpose)
}
