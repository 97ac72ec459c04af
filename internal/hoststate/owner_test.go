package hoststate

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/replica"
)

// node stands for the Pool's per-host value.
type node struct{ addr string }

// newOwner returns an Owner for target on a fake clock, holding hosts,
// each with a node.
func newOwner(t testing.TB, target hosthealth.Target, zone string, hosts ...hosthealth.HostSpec) (*Owner[node], *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	o := New[node](Options{Target: target, Zone: zone, Clock: clk})
	o.SetTable(tableOf(hosts...), hosts)
	return o, clk
}

// tableOf returns a table with a node for each of hosts.
func tableOf(hosts ...hosthealth.HostSpec) *Table[node] {
	table := &Table[node]{ByAddr: map[string]*node{}}
	for _, h := range hosts {
		n := &node{addr: h.Addr}
		table.ByAddr[h.Addr] = n
		table.List = append(table.List, n)
	}
	return table
}

func hostsOf(addrs ...string) []hosthealth.HostSpec {
	var hs []hosthealth.HostSpec
	for _, a := range addrs {
		hs = append(hs, hosthealth.HostSpec{Addr: a})
	}
	return hs
}

// answer records that the server at addr answered in role, now.
func answer(o *Owner[node], addr string, role hosthealth.Role) Result[node] {
	return o.Observe(Observation{Kind: Answered, Addr: addr, Role: role, Since: o.Epoch(addr)})
}

func addrs(ns []*node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.addr)
	}
	return out
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestBuild checks what a pick reads of the routes: each target's usable
// hosts in rank order, the Reader's candidates (freshness, tier,
// read-last, no-reads) and which nodes they hold.
func TestBuild(t *testing.T) {
	hosts := []hosthealth.HostSpec{
		{Addr: "a:5432", Zone: "z1"}, // primary
		{Addr: "b:5432", Zone: "z1"}, // replica, same zone
		{Addr: "c:5432", Zone: "z2"}, // replica, other zone, reads last
		{Addr: "d:5432", Zone: "z1"}, // replica the source keeps reads off
		{Addr: "e:5432"},             // its node could not be built
	}
	health := hosthealth.New(hosts, hosthealth.Options{Zone: "z1"})
	health = health.ObserveConnect("a:5432", hosthealth.RolePrimary)
	for _, addr := range []string{"b:5432", "c:5432", "d:5432", "e:5432"} {
		health = health.ObserveConnect(addr, hosthealth.RoleReplica)
	}
	table := tableOf(hosts[:4]...)
	table.NoReads = map[string]bool{"d:5432": true}
	table.ReadLast = map[string]bool{"c:5432": true}
	at := time.Unix(1000, 0)
	fresh := map[string]replica.Candidate{"b:5432": {Fresh: at, Replayed: 7}}
	rs := build(health, table, fresh, hosthealth.TargetPrimary, "z1")

	for _, tc := range []struct {
		target hosthealth.Target
		want   []string
	}{
		{hosthealth.TargetPrimary, []string{"a:5432"}},
		{hosthealth.TargetReplica, []string{"b:5432", "d:5432", "c:5432"}}, // same zone first; e has no node
		{hosthealth.TargetAny, []string{"a:5432", "b:5432", "d:5432", "c:5432"}},
	} {
		if got := addrs(rs.Ranked[tc.target]); !slices.Equal(got, tc.want) {
			t.Errorf("Ranked[%v] = %v, want %v", tc.target, got, tc.want)
		}
	}
	if got, want := addrs(rs.Replicas), []string{"b:5432", "c:5432"}; !slices.Equal(got, want) {
		t.Fatalf("the Reader's replicas = %v, want %v", got, want)
	}
	wantCands := []replica.Candidate{
		{Usable: true, Tier: hosthealth.TierSame, Fresh: at, Replayed: 7},
		{Usable: true, Tier: hosthealth.TierOther, Last: true},
	}
	for i, c := range rs.Cands {
		if c != wantCands[i] {
			t.Errorf("candidate %s = %+v, want %+v", rs.Replicas[i].addr, c, wantCands[i])
		}
	}
	if _, r, ok := rs.Lookup("b:5432"); !ok || r.Fresh.Replayed != 7 {
		t.Errorf("b's route: %+v, %v", r, ok)
	}
	if !rs.Holds("a:5432", table.ByAddr["a:5432"]) || rs.Holds("a:5432", &node{addr: "a:5432"}) || rs.Holds("x:5432", &node{addr: "x:5432"}) {
		t.Error("Holds: want only the nodes of the table")
	}
	if !rs.Usable("e:5432", hosthealth.TargetReplica) || rs.Usable("a:5432", hosthealth.TargetReplica) {
		t.Error("Usable: want the health's states, node or none")
	}
}

// TestWakes: a change of health wakes the Pool's and the Reader's
// waiters; a change of freshness only the Reader's; a table that repeats
// the same hosts nobody, though it is published.
func TestWakes(t *testing.T) {
	hosts := hostsOf("a:5432", "b:5432")
	o, clk := newOwner(t, hosthealth.TargetPrimary, "", hosts...)

	rs := o.Routes()
	answer(o, "a:5432", hosthealth.RolePrimary)
	if !closed(rs.Moved) || !closed(rs.Changed) {
		t.Fatal("a change of health woke nobody")
	}

	answer(o, "b:5432", hosthealth.RoleReplica)
	rs = o.Routes()
	answer(o, "b:5432", hosthealth.RoleReplica) // nothing new
	if o.Routes() != rs {
		t.Fatal("an observation that changed nothing published new routes")
	}
	o.Observe(Observation{Kind: Probed, Addr: "a:5432", Since: o.Epoch("a:5432"), Probe: probe.Result{Role: hosthealth.RolePrimary, WAL: 100, Asked: clk.Now()}})
	o.Observe(Observation{Kind: Probed, Addr: "b:5432", Since: o.Epoch("b:5432"), Probe: probe.Result{Role: hosthealth.RoleReplica, WAL: 100, Asked: clk.Now()}})
	if closed(rs.Moved) || !closed(rs.Changed) {
		t.Fatalf("a change of freshness: Moved closed %v, Changed closed %v; want false, true", closed(rs.Moved), closed(rs.Changed))
	}
	if _, r, _ := o.Routes().Lookup("b:5432"); r.Fresh.Replayed != 100 {
		t.Fatalf("b's freshness not in the routes: %+v", r.Fresh)
	}

	rs = o.Routes()
	again := &Table[node]{ByAddr: rs.Table.ByAddr, List: rs.Table.List}
	if n := o.SetTable(again, hosts); n.Changes != nil {
		t.Errorf("a table that repeats the same hosts reported changes: %+v", n.Changes)
	}
	if closed(rs.Moved) || closed(rs.Changed) {
		t.Fatal("a table that repeats the same hosts woke a waiter")
	}
	if o.Routes().Table != again {
		t.Fatal("the new table was not published")
	}

	// A host whose node could not be built before gets one: the same
	// health, but the picks find another host.
	partial := tableOf(hosts[0])
	o.SetTable(partial, hosts)
	rs = o.Routes()
	if got := addrs(rs.Ranked[hosthealth.TargetAny]); !slices.Equal(got, []string{"a:5432"}) {
		t.Fatalf("Ranked[any] with b's node missing = %v", got)
	}
	o.SetTable(tableOf(hosts...), hosts)
	if !closed(rs.Moved) || !closed(rs.Changed) {
		t.Fatal("a table that gives a host its node woke nobody")
	}

	// The source keeps reads off b: only the Reader's waiters wake.
	rs = o.Routes()
	noReads := tableOf(hosts...)
	noReads.ByAddr, noReads.List = rs.Table.ByAddr, rs.Table.List
	noReads.NoReads = map[string]bool{"b:5432": true}
	o.SetTable(noReads, hosts)
	if closed(rs.Moved) || !closed(rs.Changed) {
		t.Fatalf("reads kept off b: Moved closed %v, Changed closed %v; want false, true", closed(rs.Moved), closed(rs.Changed))
	}
	if len(o.Routes().Replicas) != 0 {
		t.Fatalf("b still a Reader candidate: %v", addrs(o.Routes().Replicas))
	}
}

// TestOrder: an answer that began before the host's latest failure is
// dropped, whether a login's or a probe's, and changes nothing, not even
// the replica's freshness; a failure is never dropped; an answer that
// began after the failure is applied.
func TestOrder(t *testing.T) {
	o, clk := newOwner(t, hosthealth.TargetPrimary, "", hostsOf("p:5432", "r:5432")...)
	answer(o, "p:5432", hosthealth.RolePrimary)
	answer(o, "r:5432", hosthealth.RoleReplica)

	login, probeBegan := o.Epoch("p:5432"), o.Epoch("r:5432")
	if res := o.Observe(Observation{Kind: Failed, Addr: "p:5432", Class: hosthealth.Transport}); res.Dropped || res.After.State != hosthealth.TransportError {
		t.Fatalf("the failure: %+v", res)
	}
	o.Observe(Observation{Kind: Failed, Addr: "r:5432", Class: hosthealth.Transient})
	if !o.Stale("p:5432", login) || o.Stale("p:5432", o.Epoch("p:5432")) {
		t.Fatal("Stale does not follow the epoch")
	}
	rs := o.Routes()
	if res := o.Observe(Observation{Kind: Answered, Addr: "p:5432", Role: hosthealth.RolePrimary, Since: login}); !res.Dropped {
		t.Errorf("a login that began before the failure was applied: %+v", res)
	}
	late := probe.Result{Role: hosthealth.RoleReplica, WAL: 500, Asked: clk.Now()}
	if res := o.Observe(Observation{Kind: Probed, Addr: "r:5432", Probe: late, Since: probeBegan}); !res.Dropped {
		t.Errorf("a probe that began before the failure was applied: %+v", res)
	}
	if o.Routes() != rs {
		t.Fatal("a dropped observation published new routes")
	}
	failedProbe := probe.Result{Err: io.ErrUnexpectedEOF}
	if res := o.Observe(Observation{Kind: Probed, Addr: "r:5432", Probe: failedProbe, Since: probeBegan}); !res.Dropped {
		t.Errorf("a probe's silence that began before the failure was applied: %+v", res)
	}
	if res := o.Observe(Observation{Kind: Probed, Addr: "r:5432", Probe: failedProbe, Since: o.Epoch("r:5432")}); res.Dropped || res.After.State != hosthealth.TransportError {
		t.Errorf("a probe's failure was dropped or not applied: %+v", res)
	}
	if res := answer(o, "p:5432", hosthealth.RolePrimary); res.Dropped || res.After.State != hosthealth.Healthy {
		t.Errorf("a login that began after the failure: %+v", res)
	}
	if res := o.Observe(Observation{Kind: Answered, Addr: "x:5432", Role: hosthealth.RolePrimary}); !res.Dropped {
		t.Error("an answer from a host not in the set was applied")
	}
}

// TestLateFailures: a failure, or a write refused by a read-only server,
// met by an attempt that began before the host's latest failure is
// dropped: calls that met one crash mark the host once, and a refusal
// read before a crash does not make the crashed host a live replica.
func TestLateFailures(t *testing.T) {
	o, _ := newOwner(t, hosthealth.TargetPrimary, "", hostsOf("p:5432", "r:5432")...)
	answer(o, "p:5432", hosthealth.RolePrimary)
	answer(o, "r:5432", hosthealth.RoleReplica)
	began := o.Epoch("p:5432")
	if res := o.Observe(Observation{Kind: Failed, Addr: "p:5432", Class: hosthealth.Transport, Since: began}); res.Dropped {
		t.Fatalf("the first failure was dropped: %+v", res)
	}
	crashed := o.Epoch("p:5432")
	if res := o.Observe(Observation{Kind: Failed, Addr: "p:5432", Class: hosthealth.Transport, Since: began}); !res.Dropped || o.Epoch("p:5432") != crashed {
		t.Errorf("the same crash, met by a second call, was recorded again: %+v", res)
	}
	rs := o.Routes()
	if res := o.Observe(Observation{Kind: Failed, Addr: "p:5432", Class: hosthealth.Topology, Since: began}); !res.Dropped || res.After.State != hosthealth.TransportError {
		t.Errorf("a refusal read before the crash was applied: %+v", res)
	}
	if o.Routes() != rs {
		t.Error("a dropped refusal published new routes")
	}
	if res := o.Observe(Observation{Kind: Failed, Addr: "p:5432", Class: hosthealth.Topology, Since: crashed}); res.Dropped || res.After.Role != hosthealth.RoleReplica {
		t.Errorf("a refusal after the crash: %+v", res)
	}
}

// TestSamples: the primary's samples for pinned reads are kept only from
// observations the Owner takes: a probe's answer, and a position asked on
// a connection while the host has not failed since.
func TestSamples(t *testing.T) {
	o, clk := newOwner(t, hosthealth.TargetPrimary, "", hostsOf("p:5432")...)
	wrote := clk.Now()
	clk.Advance(time.Millisecond)
	if _, step, _ := o.NeedSample("p:5432", wrote); step != replica.Ask {
		t.Fatalf("no sample yet: step %v", step)
	}
	since := o.Epoch("p:5432")
	o.Observe(Observation{Kind: Failed, Addr: "p:5432", Class: hosthealth.Transport, Since: since})
	o.AnswerSample("p:5432", since, replica.Sample{LSN: 100, At: clk.Now()}, true)
	if _, step, _ := o.NeedSample("p:5432", wrote); step != replica.Ask {
		t.Errorf("a position asked before the host failed was kept: step %v", step)
	}
	o.AnswerSample("p:5432", since, replica.Sample{}, false)
	o.Observe(Observation{Kind: Sampled, Addr: "p:5432", Sample: replica.Sample{LSN: 100, At: clk.Now()}, Since: since})
	if _, step, _ := o.NeedSample("p:5432", wrote); step != replica.Ask {
		t.Errorf("a stale Sampled observation was kept: step %v", step)
	}
	o.AnswerSample("p:5432", since, replica.Sample{}, false)
	res := o.Observe(Observation{Kind: Probed, Addr: "p:5432", Since: o.Epoch("p:5432"),
		Probe: probe.Result{Role: hosthealth.RolePrimary, WAL: 200, Asked: clk.Now()}})
	if res.Dropped {
		t.Fatalf("the probe's answer was dropped: %+v", res)
	}
	if s, step, _ := o.NeedSample("p:5432", wrote); step != replica.Use || s.LSN != 200 {
		t.Errorf("the probe's sample: %+v %v", s, step)
	}
}

// TestDemoted: a server that states a role the target does not accept,
// in which it was not known, is reported demoted once; a write refused by
// a replica (a Topology failure) is such a statement and starts no epoch.
func TestDemoted(t *testing.T) {
	o, _ := newOwner(t, hosthealth.TargetPrimary, "", hostsOf("a:5432")...)
	if answer(o, "a:5432", hosthealth.RolePrimary).Demoted {
		t.Fatal("a primary reported demoted")
	}
	e := o.Epoch("a:5432")
	if res := o.Observe(Observation{Kind: Failed, Addr: "a:5432", Class: hosthealth.Topology}); !res.Demoted || res.After.Role != hosthealth.RoleReplica {
		t.Fatalf("a write refused by a replica: %+v", res)
	}
	if o.Epoch("a:5432") != e {
		t.Error("a Topology failure started a new epoch")
	}
	if answer(o, "a:5432", hosthealth.RoleReplica).Demoted {
		t.Error("a replica known as one reported demoted again")
	}
}

// TestDowntimeEnds: the time the target had no usable host is measured on
// the Owner's clock, from the host the calls were using.
func TestDowntimeEnds(t *testing.T) {
	o, clk := newOwner(t, hosthealth.TargetPrimary, "", hostsOf("a:5432", "b:5432")...)
	answer(o, "a:5432", hosthealth.RolePrimary)
	answer(o, "b:5432", hosthealth.RoleReplica)
	clk.Advance(time.Second)
	res := o.Observe(Observation{Kind: Failed, Addr: "a:5432", Class: hosthealth.Transport})
	if res.Ended != nil || len(res.Changes) != 1 {
		t.Fatalf("the failure: %+v", res.News)
	}
	clk.Advance(1500 * time.Millisecond)
	res = answer(o, "b:5432", hosthealth.RolePrimary)
	if res.Ended == nil || res.Ended.Host.addr != "a:5432" || res.At.Sub(res.Ended.Since) != 1500*time.Millisecond {
		t.Fatalf("the end of the outage: %+v", res.News)
	}
	if c := res.Changes; len(c) != 1 || c[0].After.Addr != "b:5432" || c[0].Before.Role != hosthealth.RoleReplica {
		t.Errorf("changes: %+v", c)
	}
}

// TestDowntimeByTable: a table that alone takes the only usable host out
// of the rankings (its entry could not be built) starts a downtime, and
// the table that brings it back ends it, timed on the clock.
func TestDowntimeByTable(t *testing.T) {
	hosts := hostsOf("a:5432", "b:5432")
	o, clk := newOwner(t, hosthealth.TargetPrimary, "", hosts...)
	answer(o, "a:5432", hosthealth.RolePrimary)
	answer(o, "b:5432", hosthealth.RoleReplica)
	clk.Advance(time.Second)
	without := tableOf(hosts...)
	without.ByAddr["a:5432"] = nil
	without.List = without.List[1:]
	if n := o.SetTable(without, hosts); n.Ended != nil || len(n.Changes) != 0 {
		t.Fatalf("the table without a: %+v", n)
	}
	if r := o.Routes().Ranked[hosthealth.TargetPrimary]; len(r) != 0 {
		t.Fatalf("a is still ranked: %v", addrs(r))
	}
	clk.Advance(700 * time.Millisecond)
	n := o.SetTable(tableOf(hosts...), hosts)
	if n.Ended == nil || n.Ended.Host.addr != "a:5432" || n.At.Sub(n.Ended.Since) != 700*time.Millisecond {
		t.Fatalf("the table with a again: %+v, want the downtime of a ended after 700ms", n)
	}
}

// TestWaitForUsableHost: a caller finds no usable replica and waits on
// the routes' Moved channel; no change can slip between the look and the
// wait, and an observation that changes nothing wakes nobody.
func TestWaitForUsableHost(t *testing.T) {
	o, _ := newOwner(t, hosthealth.TargetReplica, "", hostsOf("a", "b")...)
	answer(o, "a", hosthealth.RolePrimary)
	o.Observe(Observation{Kind: Failed, Addr: "b", Class: hosthealth.Transport})
	got := make(chan string)
	waiting := make(chan struct{})
	go func() {
		for first := true; ; first = false {
			rs := o.Routes()
			if r := rs.Ranked[hosthealth.TargetReplica]; len(r) > 0 {
				got <- r[0].addr
				return
			}
			if first {
				close(waiting)
			}
			<-rs.Moved
		}
	}()
	<-waiting
	answer(o, "a", hosthealth.RolePrimary) // changes nothing: no wake-up
	o.Observe(Observation{Kind: Failed, Addr: "a", Class: hosthealth.Transient})
	answer(o, "b", hosthealth.RoleReplica)
	if addr := <-got; addr != "b" {
		t.Errorf("waiter got %s, want b", addr)
	}
}

// TestConcurrentUse: writers observe and replace the host set while
// readers check that every Routes they load is whole: its rankings agree
// with its health and its table, and it never changes under them.
func TestConcurrentUse(t *testing.T) {
	const hosts, writers, readers, rounds = 8, 4, 4, 300
	var all []hosthealth.HostSpec
	for i := range hosts + 2 {
		all = append(all, hosthealth.HostSpec{Addr: fmt.Sprintf("h%d", i), Zone: fmt.Sprintf("z%d", i%3)})
	}
	o, clk := newOwner(t, hosthealth.TargetPrimary, "z0", all[:hosts]...)
	first := o.Routes()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for n := range rounds {
				addr := fmt.Sprintf("h%d", (n*7+w)%(hosts+2)) // h8 and h9 come and go
				switch n % 5 {
				case 0:
					answer(o, addr, hosthealth.Role(1+n%2))
				case 1:
					o.Observe(Observation{Kind: Failed, Addr: addr, Class: hosthealth.Class(n % 5)})
				case 2:
					o.Observe(Observation{Kind: Probed, Addr: addr, Since: o.Epoch(addr), Probe: probe.Result{Role: hosthealth.RoleReplica, WAL: replica.LSN(n), Asked: clk.Now()}})
				case 3:
					o.Observe(Observation{Kind: Probed, Addr: addr, Since: o.Epoch(addr), Probe: probe.Result{Err: errors.New("refused")}})
				case 4:
					hs := all[:hosts+n%3]
					o.SetTable(tableOf(hs...), hs)
				}
			}
		})
	}
	done := make(chan struct{})
	errs := make(chan string, readers)
	var rwg sync.WaitGroup
	for range readers {
		rwg.Go(func() {
			for {
				rs := o.Routes()
				if e := check(rs); e != "" {
					errs <- e
					return
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	wg.Wait()
	close(done)
	rwg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if !closed(first.Moved) {
		t.Error("the first routes' Moved is still open")
	}
	if last := o.Routes(); closed(last.Moved) || closed(last.Changed) {
		t.Error("the current routes' channels are closed")
	}
}

// check reports what is wrong with rs, or "".
func check(rs *Routes[node]) string {
	if len(rs.Hosts) != rs.Health.Len() {
		return fmt.Sprintf("%d routes for %d hosts", len(rs.Hosts), rs.Health.Len())
	}
	for t := range NumTargets {
		target := hosthealth.Target(t)
		var want []string
		for _, i := range rs.Health.Ranking(target) {
			st := rs.Health.Host(i)
			if n := rs.Table.ByAddr[st.Addr]; rs.Health.Usable(i, target) && n != nil {
				want = append(want, n.addr)
			}
		}
		if got := addrs(rs.Ranked[t]); !slices.Equal(got, want) {
			return fmt.Sprintf("%v: Ranked %v, health says %v", target, got, want)
		}
	}
	return ""
}
