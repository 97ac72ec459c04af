package engine

import (
	"context"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/internal/telemetry"
	"github.com/pgfailover/pgfailover/replica"
)

// outageEngine builds, in memory and without servers, an Engine with a primary
// p and replicas r1 and r2, all answering, on a fake clock, with a
// Reader under policy.
func outageEngine(t *testing.T, policy replica.Policy) (*Engine, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	hosts := []hosthealth.HostSpec{{Addr: "p:5432"}, {Addr: "r1:5432"}, {Addr: "r2:5432"}}
	e := &Engine{
		Settings: Settings{Target: hosthealth.TargetPrimary},
		Clock:    clk,
		Steer:    NoSteer{},
	}
	tel, err := telemetry.New(telemetry.Config{MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	e.Telemetry = tel
	e.reader = Reader{e: e, wait: 20 * time.Millisecond, router: replica.Router{Policy: policy}}
	newMemState(e)
	setMemHosts(e, hosts, nil)
	memAnswer(e, "p:5432", hosthealth.RolePrimary)
	memAnswer(e, "r1:5432", hosthealth.RoleReplica)
	memAnswer(e, "r2:5432", hosthealth.RoleReplica)
	return e, clk
}

// failPrimary records that the primary could not be reached.
func failPrimary(e *Engine) {
	memFail(e, "p:5432", hosthealth.Transport)
}

// probeReplica records a probe of a replica asked now.
func probeReplica(e *Engine, clk *clock.Fake, addr string, replayed, received replica.LSN, receiving bool) {
	memProbe(e, addr, probe.Result{Role: hosthealth.RoleReplica, WAL: replayed, Received: received, Receiving: receiving, Asked: clk.Now()})
}

// pick routes a read with the given position (pinned: by the Pool's last
// write) as the Reader would, and returns where it goes.
func pick(e *Engine, c *call) (addr string) {
	h, _ := e.reader.next(e.State.Routes(), c)
	if h == nil {
		return ""
	}
	return h.Addr
}

// TestOutageInRoutes: the routing state holds what the replicas hold only
// while no host is usable as the primary; a replica's probe then wakes
// the Reader's waiters even when its positions stay the same.
func TestOutageInRoutes(t *testing.T) {
	e, clk := outageEngine(t, replica.Policy{PinAfterWrite: time.Second})
	memProbe(e, "p:5432", probe.Result{Role: hosthealth.RolePrimary, WAL: 1000, Asked: clk.Now(), Sync: true})
	probeReplica(e, clk, "r1:5432", 1000, 1000, true)
	if e.State.Routes().Outage != nil {
		t.Fatal("an outage in the routes while the primary is usable")
	}
	failPrimary(e)
	rs := e.State.Routes()
	if rs.Outage == nil || !rs.Outage.Sync() {
		t.Fatalf("no outage, or not synchronous, once the primary failed: %+v", rs.Outage)
	}
	clk.Advance(time.Second)
	probeReplica(e, clk, "r1:5432", 1000, 1000, false)
	select {
	case <-rs.Changed:
	default:
		t.Fatal("a replica's probe during the outage woke no Reader waiter")
	}
	if rs.Moved != e.State.Routes().Moved {
		t.Fatal("a replica's probe during the outage woke the Pool's waiters")
	}
	memAnswer(e, "r2:5432", hosthealth.RolePrimary)
	if e.State.Routes().Outage != nil {
		t.Fatal("the outage stays in the routes once a host is usable as the primary")
	}
}

// TestRouteInOutage follows reads pinned by a write through a primary's
// crash: where each goes, why, and whether the replica is checked first.
func TestRouteInOutage(t *testing.T) {
	e, clk := outageEngine(t, replica.Policy{PinAfterWrite: time.Second})
	memProbe(e, "p:5432", probe.Result{Role: hosthealth.RolePrimary, WAL: 1000, Asked: clk.Now(), Sync: true})
	probeReplica(e, clk, "r1:5432", 1000, 1000, true)
	probeReplica(e, clk, "r2:5432", 900, 1000, true)
	clk.Advance(10 * time.Millisecond)
	e.noteWrite() // a write the reads must see, after the probes
	clk.Advance(10 * time.Millisecond)
	pinned := func() *call {
		c := &call{e: e, ctx: context.Background(), picker: picker{target: hosthealth.TargetAny, reads: &e.reader}}
		c.set(pinned, true)
		c.after = UnknownPosition
		return c
	}

	// The primary is usable: a pinned read without a sample goes there.
	if got := pick(e, pinned()); got != "p:5432" {
		t.Fatalf("with the primary usable, a pinned read went to %q", got)
	}
	failPrimary(e)

	// Every replica was last looked at before the write: the read looks
	// at one, then at the other, then waits.
	c := pinned()
	if got := pick(e, c); got != "r1:5432" || !c.is(verifyPos) || c.reason != replica.OutageSync || c.ev.outage != 0 {
		t.Fatalf("first pick: %q, verify %v, reason %v, outage %v; want a look at r1", got, c.is(verifyPos), c.reason, c.ev.outage)
	}
	c.ev.looked = append(c.ev.looked, "r1:5432") // as look does
	memObserve(e, "r1:5432", hoststate.Observation{Kind: hoststate.Looked, Report: replica.Report{At: clk.Now(), Replayed: 1200, Received: 1200}})
	if got := pick(e, c); got != "r2:5432" || !c.is(verifyPos) || c.ev.outage != 0 {
		t.Fatalf("second pick: %q, verify %v, outage %v; want a look at r2", got, c.is(verifyPos), c.ev.outage)
	}
	c.ev.looked = append(c.ev.looked, "r2:5432")
	if got := pick(e, c); got != "" || c.reason != replica.Pinned {
		t.Fatalf("with both looked at and r2 still unknown: %q (%v), want a wait for the primary", got, c.reason)
	}

	// r2's probe after the write: it received a little more than r1.
	clk.Advance(time.Millisecond)
	probeReplica(e, clk, "r2:5432", 1000, 1250, false)
	// Neither is known to have replayed 1250: each is checked for it in
	// turn. Neither gets there in replica_wait (r1 replays slowly, r2's
	// replay is paused): the read waits for a primary.
	var checked []string
	for range 2 {
		got := pick(e, c)
		if got == "" || !c.is(verifyPos) || c.ev.outage != 1250 || c.reason != replica.OutageSync {
			t.Fatalf("with r2 ahead: %q, verify %v, outage %v, reason %v; want a replica checked for 1250", got, c.is(verifyPos), c.ev.outage, c.reason)
		}
		checked = append(checked, got)
		c.ev.short = append(c.ev.short, got) // as confirm records it
	}
	if checked[0] == checked[1] {
		t.Fatalf("%s checked twice", checked[0])
	}
	if got := pick(e, c); got != "" {
		t.Fatalf("with both short: %q, want a wait for the primary", got)
	}

	// r1 replays it after all (seen by another read's check, say): the
	// read takes r1 unchecked, and so do new reads.
	memObserve(e, "r1:5432", hoststate.Observation{Kind: hoststate.Replayed, LSN: 1250})
	if got := pick(e, c); got != "r1:5432" || c.is(verifyPos) || c.reason != replica.OutageSync {
		t.Fatalf("r1 short, then known to have replayed it: %q, verify %v, reason %v; want r1 unchecked", got, c.is(verifyPos), c.reason)
	}
	for range 2 {
		c = pinned()
		if got := pick(e, c); got != "r1:5432" || c.is(verifyPos) || c.reason != replica.OutageSync {
			t.Fatalf("after r1 replayed it: %q, verify %v, reason %v; want r1 unchecked", got, c.is(verifyPos), c.reason)
		}
	}

	// A later write (its answer came after the failure was seen): the
	// replicas must be looked at again.
	clk.Advance(time.Millisecond)
	e.noteWrite()
	if got := pick(e, pinned()); got == "" || !e.State.Routes().Outage.Stale(got, e.LastWrite()) {
		t.Fatalf("after a later write: %q, want a look at a replica", got)
	}

	// A new primary: the rule stops, and the pinned read goes there.
	memAnswer(e, "r2:5432", hosthealth.RolePrimary)
	if got := pick(e, pinned()); got != "r2:5432" {
		t.Fatalf("with a new primary: %q, want it", got)
	}
}

// TestRouteInOutageAsynchronous: without synchronous replication the
// position counts only once no replica receives WAL; outage_reads=wait
// makes the reads wait whatever the replication.
func TestRouteInOutageAsynchronous(t *testing.T) {
	for _, policy := range []replica.OutageReads{replica.OutageReplica, replica.OutageWait} {
		e, clk := outageEngine(t, replica.Policy{PinAfterWrite: time.Second, OutageReads: policy})
		memProbe(e, "p:5432", probe.Result{Role: hosthealth.RolePrimary, WAL: 1000, Asked: clk.Now()})
		e.noteWrite()
		failPrimary(e)
		clk.Advance(time.Millisecond)
		probeReplica(e, clk, "r1:5432", 1000, 1000, false)
		probeReplica(e, clk, "r2:5432", 1000, 1000, true)
		c := &call{e: e, ctx: context.Background(), picker: picker{target: hosthealth.TargetAny, reads: &e.reader}}
		c.set(pinned, true)
		c.after = UnknownPosition
		if got := pick(e, c); got != "" {
			t.Fatalf("%v: with r2 still receiving: %q, want a wait", policy, got)
		}
		probeReplica(e, clk, "r2:5432", 1000, 1000, false)
		got := pick(e, c)
		switch {
		case policy == replica.OutageWait && got != "":
			t.Fatalf("wait: with every receiver stopped: %q, want a wait", got)
		case policy == replica.OutageReplica && (got == "" || c.is(verifyPos) || c.reason != replica.OutageAsync):
			t.Fatalf("replica: with every receiver stopped: %q, verify %v, reason %v; want a replica, unchecked", got, c.is(verifyPos), c.reason)
		}
	}
}

// TestRouteInOutageCausalToken: a read whose token's position no replica
// reached, while no primary is usable, counts from when the rule was first
// applied to it: a replica looked at before that is looked at again.
func TestRouteInOutageCausalToken(t *testing.T) {
	e, clk := outageEngine(t, replica.Policy{})
	memProbe(e, "p:5432", probe.Result{Role: hosthealth.RolePrimary, WAL: 1000, Asked: clk.Now(), Sync: true})
	failPrimary(e)
	clk.Advance(time.Millisecond)
	probeReplica(e, clk, "r1:5432", 1100, 1100, false)
	probeReplica(e, clk, "r2:5432", 1100, 1100, false)
	clk.Advance(time.Millisecond)
	c := &call{e: e, ctx: context.Background(), picker: picker{target: hosthealth.TargetAny, reads: &e.reader}}
	c.after = 1500 // written just before the crash, beyond what any replica received
	// Its own position first: each replica is checked for it, and found
	// behind (as confirm records).
	for range 2 {
		got := pick(e, c)
		if got == "" || !c.is(verifyPos) || c.reason != replica.Verify {
			t.Fatalf("a check for the token's position: %q, verify %v, reason %v; want a replica", got, c.is(verifyPos), c.reason)
		}
		c.events().behind = append(c.ev.behind, got)
	}
	clk.Advance(time.Millisecond)
	if got := pick(e, c); got != "r1:5432" || !c.is(verifyPos) || c.reason != replica.OutageSync || c.ev.outage != 0 {
		t.Fatalf("then: %q, verify %v, reason %v, outage %v; want a look at r1", got, c.is(verifyPos), c.reason, c.ev.outage)
	}
	if !c.ev.since.Equal(clk.Now()) {
		t.Fatalf("since = %v, want the time the rule was first applied, %v", c.ev.since, clk.Now())
	}
}
