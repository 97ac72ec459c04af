package engine

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/patroni"
	"github.com/pgfailover/pgfailover/topology"
)

var (
	_ Steerer           = LocalFirst{}
	_ patroni.Connector = (*hostpool.Set)(nil)
)

// Steerer sends the Pool's own calls to a host of its choosing ahead of
// the ranking: the local-first fallback (fallback_local, LocalFirst) is
// the one there is, and NoSteer stands in when it is off. The walk, the
// probes and the host table call it through this interface and know
// nothing else of it. Its methods are safe for concurrent use; none does
// I/O on the caller's goroutine, and only Choose may wait.
type Steerer interface {
	// Choose returns the address of the host a call should go to now, or
	// "" to let the ranking choose. The host is used only when it can
	// take the call. Choose may wait, within its own bound and ctx, for
	// such a host to be found.
	Choose(ctx context.Context) string
	// Failed tells of a failover event on the host at addr, met by a call
	// or a probe.
	Failed(addr string, err error)
	// Members hands over each report of the topology source.
	Members([]topology.Member)
	// Budget returns a call's failover budget, given the configured one.
	Budget(configured time.Duration) time.Duration
	// Register reports the steerer's gauges on meter at each collection;
	// Close unregisters them. The registration is nil when it has none.
	Register(meter metric.Meter) (metric.Registration, error)
}

// NoSteer is the Steerer of a Pool without local-first fallback: the
// ranking alone chooses.
type NoSteer struct{}

func (NoSteer) Choose(context.Context) string                      { return "" }
func (NoSteer) Failed(string, error)                               {}
func (NoSteer) Members([]topology.Member)                          {}
func (NoSteer) Budget(configured time.Duration) time.Duration      { return configured }
func (NoSteer) Register(metric.Meter) (metric.Registration, error) { return nil, nil }

// LocalFirst is the local-first fallback (fallback_local) as the Pool's
// Steerer: the connection string's first host is the local server and
// takes the Pool's calls; when it fails, calls go to a fallback host found
// by racing the cluster's synchronous standbys, then the other members.
// patroni.LocalFirst runs it, on the Pool's hosts (hostpool.Set).
type LocalFirst struct{ LF *patroni.LocalFirst }

func (s LocalFirst) Choose(ctx context.Context) string             { return s.LF.Choose(ctx) }
func (s LocalFirst) Failed(addr string, err error)                 { s.LF.Failed(addr, err) }
func (s LocalFirst) Members(members []topology.Member)             { s.LF.SetMembers(members) }
func (s LocalFirst) Budget(configured time.Duration) time.Duration { return s.LF.Budget(configured) }
func (s LocalFirst) Register(metric.Meter) (metric.Registration, error) {
	return s.LF.Register() // on the Pool's meter, given at construction
}
