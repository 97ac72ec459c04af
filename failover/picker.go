package failover

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/topology"
)

// picker decides which hosts a call may use, and in which order. The Pool's
// calls pick for the Pool's target, best ranked first; other routes (reads
// spread over replicas) bring their own picker to the same walk. It is a
// concrete type, not an interface, so that a call on the caller's stack
// stays there.
type picker struct {
	target hosthealth.Target
	reads  *Reader // set for the Reader's calls, which route by its rules
}

// poolOf returns the pgxpool of h that the picker's calls use: the
// Reader's read-only sessions, or the Pool's own connections.
func (pk picker) poolOf(h *hostpool.Host) *pgxpool.Pool {
	if pk.reads != nil {
		return h.Reads
	}
	return h.Calls
}

// changed returns the channel closed when something the picker reads
// changes in rs: the hosts' health for the Pool's calls, and for the
// Reader's the replicas' freshness too.
func (pk picker) changed(rs *routes) <-chan struct{} {
	if pk.reads == nil {
		return rs.Moved
	}
	return rs.Changed
}

// next returns the best host in rs that can take the call now and is not
// held back by the call, or nil. heldBack reports whether a usable host was
// passed over only because the call's backoff holds it back.
func (pk picker) next(rs *routes, c *call) (h *hostpool.Host, heldBack bool) {
	if pk.reads != nil {
		return pk.reads.next(rs, c)
	}
	if c.picker.reads == nil { // on the Reader's way to the primary, the steerer has no say
		if h := pk.steered(rs, c); h != nil {
			return h, false
		}
	}
	for _, h := range rs.Ranked[pk.target] {
		if c.heldBack(h) {
			heldBack = true
			continue
		}
		if c.picker.reads != nil && c.ev != nil && slices.Contains(c.ev.behind, h.Addr) {
			// On the Reader's way to the primary: a host whose
			// connection reached another server that could not take the
			// read (Reader.confirmElsewhere) is passed over for it.
			continue
		}
		return h, heldBack
	}
	return nil, heldBack
}

// steered returns the host the Pool's steerer chooses for c, when it can
// take the call now and c does not hold it back, else nil.
func (pk picker) steered(rs *routes, c *call) *hostpool.Host {
	addr := c.p.steer.choose(c.ctx)
	if addr == "" {
		return nil
	}
	h := rs.Table.ByAddr[addr]
	if h == nil || c.heldBack(h) || !rs.Usable(addr, pk.target) {
		return nil
	}
	return h
}

// noHost reports whether every host in s is in the wrong role for the
// picker's target.
func (pk picker) noHost(s *hosthealth.Snapshot) bool {
	for i := range s.Len() {
		if s.State(i, pk.target) != hosthealth.TopologyReject {
			return false
		}
	}
	return true
}

// steerer sends the Pool's own calls to a host of its choosing ahead of
// the ranking: the local-first fallback (fallback_local, fallback.go) is
// the one there is, and noSteer stands in when it is off. The walk, the
// probes and the host table call it through this interface and know
// nothing else of it. Its methods are safe for concurrent use; none does
// I/O on the caller's goroutine, and only choose may wait.
type steerer interface {
	// choose returns the address of the host a call should go to now, or
	// "" to let the ranking choose. The host is used only when it can
	// take the call. choose may wait, within its own bound and ctx, for
	// such a host to be found.
	choose(ctx context.Context) string
	// failed tells of a failover event on the host at addr, met by a call
	// or a probe.
	failed(addr string, err error)
	// members hands over each report of the topology source.
	members([]topology.Member)
	// budget returns a call's failover budget, given the configured one.
	budget(configured time.Duration) time.Duration
	// register reports the steerer's gauges on meter at each collection;
	// Close unregisters them. The registration is nil when it has none.
	register(meter metric.Meter) (metric.Registration, error)
}

// noSteer is the steerer of a Pool without local-first fallback: the
// ranking alone chooses.
type noSteer struct{}

func (noSteer) choose(context.Context) string                      { return "" }
func (noSteer) failed(string, error)                               {}
func (noSteer) members([]topology.Member)                          {}
func (noSteer) budget(configured time.Duration) time.Duration      { return configured }
func (noSteer) register(metric.Meter) (metric.Registration, error) { return nil, nil }
