package failover

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/hosthealth"
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
func (pk picker) poolOf(h *hostPool) *pgxpool.Pool {
	if pk.reads != nil {
		return h.reads
	}
	return h.pool
}

// changed returns a channel closed when something the picker reads,
// beyond the host snapshot, changes: for the Reader, the replicas'
// freshness. It is nil (never ready) for the Pool's own calls.
func (pk picker) changed() <-chan struct{} {
	if pk.reads == nil {
		return nil
	}
	return pk.reads.p.lag.view.Load().changed
}

// next returns the best host in s that can take the call now and is not
// held back by the call, or nil. heldBack reports whether a usable host was
// passed over only because the call's backoff holds it back.
func (pk picker) next(s *hosthealth.Snapshot, hosts *hostTable, c *call) (h *hostPool, heldBack bool) {
	if pk.reads != nil {
		return pk.reads.next(s, hosts, c)
	}
	if lf := c.p.local; lf != nil && c.picker.reads == nil {
		if h := lf.next(s, hosts, c); h != nil {
			return h, false
		}
	}
	for _, i := range s.Ranking(pk.target) {
		if !s.Usable(i, pk.target) {
			break // the ranking puts every usable host first
		}
		h := hosts.byAddr[s.Host(i).Addr]
		switch {
		case h == nil || h.retired.Load():
			continue // left the topology since the snapshot
		case c.heldBack(h):
			heldBack = true
			continue
		}
		return h, heldBack
	}
	return nil, heldBack
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
