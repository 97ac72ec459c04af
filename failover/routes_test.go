package failover

import (
	"slices"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/replica"
)

// TestBuildRoutes builds a routing state in memory and checks what a pick
// reads of it: each target's usable hosts in rank order, the Reader's
// candidates (freshness, tier, read-last, no-reads) and which pools it
// holds.
func TestBuildRoutes(t *testing.T) {
	hosts := []hosthealth.Host{
		{Addr: "a:5432", Zone: "z1"}, // primary
		{Addr: "b:5432", Zone: "z1"}, // replica, same zone
		{Addr: "c:5432", Zone: "z2"}, // replica, other zone, reads last
		{Addr: "d:5432", Zone: "z1"}, // replica the source keeps reads off
		{Addr: "e:5432"},             // its pool could not be built
	}
	tracker := hosthealth.NewTracker(hosts, hosthealth.Options{Zone: "z1"})
	tracker.ObserveConnect("a:5432", hosthealth.RolePrimary)
	for _, addr := range []string{"b:5432", "c:5432", "d:5432", "e:5432"} {
		tracker.ObserveConnect(addr, hosthealth.RoleReplica)
	}
	table := &hostTable{byAddr: map[string]*hostPool{},
		noReads: map[string]bool{"d:5432": true}, readLast: map[string]bool{"c:5432": true}}
	for _, h := range hosts[:4] {
		hp := &hostPool{addr: h.Addr}
		table.byAddr[h.Addr] = hp
		table.list = append(table.list, hp)
	}
	at := time.Unix(1000, 0)
	fresh := map[string]replica.Candidate{"b:5432": {Fresh: at, Replayed: 7}}
	rs := buildRoutes(tracker.Snapshot(), table, fresh, nil, hosthealth.TargetPrimary, "z1")

	addrsOf := func(hs []*hostPool) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.addr)
		}
		return out
	}
	for _, tc := range []struct {
		target hosthealth.Target
		want   []string
	}{
		{hosthealth.TargetPrimary, []string{"a:5432"}},
		{hosthealth.TargetReplica, []string{"b:5432", "d:5432", "c:5432"}}, // same zone first; e has no pool
		{hosthealth.TargetAny, []string{"a:5432", "b:5432", "d:5432", "c:5432"}},
	} {
		if got := addrsOf(rs.ranked[tc.target]); !slices.Equal(got, tc.want) {
			t.Errorf("ranked[%v] = %v, want %v", tc.target, got, tc.want)
		}
	}
	if got, want := addrsOf(rs.replicas), []string{"b:5432", "c:5432"}; !slices.Equal(got, want) {
		t.Fatalf("the Reader's replicas = %v, want %v", got, want)
	}
	wantCands := []replica.Candidate{
		{Usable: true, Tier: hosthealth.TierSame, Fresh: at, Replayed: 7},
		{Usable: true, Tier: hosthealth.TierOther, Last: true},
	}
	for i, c := range rs.cands {
		if c != wantCands[i] {
			t.Errorf("candidate %s = %+v, want %+v", rs.replicas[i].addr, c, wantCands[i])
		}
	}
	if _, r, ok := rs.lookup("b:5432"); !ok || r.fresh.Replayed != 7 {
		t.Errorf("b's route: %+v, %v", r, ok)
	}
	if !rs.holds(table.byAddr["a:5432"]) || rs.holds(&hostPool{addr: "a:5432"}) || rs.holds(&hostPool{addr: "x:5432"}) {
		t.Error("holds: want only the pools of the table")
	}
	if !rs.usable("e:5432", hosthealth.TargetReplica) || rs.usable("a:5432", hosthealth.TargetReplica) {
		t.Error("usable: want the health's states, pool or none")
	}
}

// TestRerouteWakes: a change of health wakes the Pool's and the Reader's
// waiters; a change of freshness only the Reader's; a table that repeats
// the same hosts nobody.
func TestRerouteWakes(t *testing.T) {
	hosts := []hosthealth.Host{{Addr: "a:5432"}, {Addr: "b:5432"}}
	p := &Pool{
		cfg:     &Config{},
		clock:   clock.Real(),
		tracker: hosthealth.NewTracker(nil, hosthealth.Options{}),
		lag:     replica.NewBook(historySize, sampleSpacing),
	}
	p.routes.Store(firstRoutes(p.tracker.Snapshot()))
	table := &hostTable{byAddr: map[string]*hostPool{}}
	for _, h := range hosts {
		hp := &hostPool{addr: h.Addr}
		table.byAddr[h.Addr] = hp
		table.list = append(table.list, hp)
	}
	p.setTable(table, hosts, nil)
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}

	rs := p.routes.Load()
	p.tracker.ObserveConnect("a:5432", hosthealth.RolePrimary)
	p.reroute()
	if !closed(rs.moved) || !closed(rs.changed) {
		t.Fatal("a change of health woke nobody")
	}

	p.tracker.ObserveConnect("b:5432", hosthealth.RoleReplica)
	p.reroute()
	rs = p.routes.Load()
	p.probedLag("a:5432", probeResult{role: hosthealth.RolePrimary, wal: 100, asked: time.Unix(1, 0)})
	p.probedLag("b:5432", probeResult{role: hosthealth.RoleReplica, wal: 100})
	if closed(rs.moved) || !closed(rs.changed) {
		t.Fatalf("a change of freshness: moved closed %v, changed closed %v; want false, true", closed(rs.moved), closed(rs.changed))
	}
	if _, r, _ := p.routes.Load().lookup("b:5432"); r.fresh.Replayed != 100 {
		t.Fatalf("b's freshness not in the routes: %+v", r.fresh)
	}

	rs = p.routes.Load()
	again := &hostTable{byAddr: table.byAddr, list: table.list}
	p.setTable(again, hosts, nil)
	if closed(rs.moved) || closed(rs.changed) {
		t.Fatal("a table that repeats the same hosts woke a waiter")
	}
	if p.routes.Load().table != again {
		t.Fatal("the new table was not published")
	}
}
