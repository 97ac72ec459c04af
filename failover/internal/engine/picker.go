package engine

import (
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/hoststate"
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
// take the call now and c does not hold it back, else nil. A choice that
// host state counts unusable is news the steerer has not had (the local
// server still down when its cooldown ran out, or a failure on its way to
// the steerer): it is told, and asked once more, so that the call goes
// where the steerer falls back to rather than down the ranking.
func (pk picker) steered(rs *routes, c *call) *hostpool.Host {
	for range 2 {
		addr := c.e.Steer.Choose(c.ctx)
		if addr == "" {
			return nil
		}
		h := rs.Table.ByAddr[addr]
		if h == nil || c.heldBack(h) {
			return nil
		}
		if rs.Usable(addr, pk.target) {
			return h
		}
		c.e.Steer.Failed(addr, hostpool.ErrHostNotUsable)
		rs = c.e.State.Routes() // Choose may have waited for a discovery round
	}
	return nil
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

// routes is the Pool's routing value: everything host state offers a
// pick (the hosts' health and rankings, the host table, the replicas'
// freshness), published by the owner of host state (internal/hoststate)
// and read lock-free through Engine.State.Routes.
type routes = hoststate.Routes[hostpool.Host]
