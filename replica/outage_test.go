package replica

import (
	"testing"
	"time"
)

// outageAt returns the time ms milliseconds into an outage test.
func outageAt(ms int) time.Time {
	return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
}

// TestOutagePosition: the position a read must find replayed while no
// primary is usable, for writes acknowledged before since (100 ms), from
// what the replicas held when last looked at.
func TestOutagePosition(t *testing.T) {
	since := outageAt(100)
	after, before := outageAt(150), outageAt(50)
	for _, tc := range []struct {
		name    string
		sync    bool
		reports map[string]Report
		want    LSN
		ok      bool
	}{
		{"no replica looked at", true, nil, 0, false},
		{"one replica, looked at after the writes", true,
			map[string]Report{"r1": {At: after, Replayed: 500, Received: 500}}, 500, true},
		{"it has not replayed all it received: the position is still what it received", true,
			map[string]Report{"r1": {At: after, Replayed: 400, Received: 500}}, 500, true},
		{"looked at before the writes", true,
			map[string]Report{"r1": {At: before, Replayed: 500, Received: 500}}, 0, false},
		{"looked at just as the last write completed", true,
			map[string]Report{"r1": {At: since, Replayed: 500, Received: 500}}, 0, false},
		{"one of two looked at before the writes", true,
			map[string]Report{"r1": {At: after, Replayed: 500, Received: 500}, "r2": {At: before, Replayed: 700, Received: 700}}, 0, false},
		{"the most any replica received", true,
			map[string]Report{"r1": {At: after, Replayed: 500, Received: 500}, "r2": {At: after, Replayed: 300, Received: 700}}, 700, true},
		{"synchronous: a receiver still connected changes nothing", true,
			map[string]Report{"r1": {At: after, Replayed: 500, Received: 500, Receiving: true}}, 500, true},
		{"asynchronous: a receiver still connected may receive more", false,
			map[string]Report{"r1": {At: after, Replayed: 500, Received: 500}, "r2": {At: after, Replayed: 500, Received: 500, Receiving: true}}, 0, false},
		{"asynchronous: every receiver stopped", false,
			map[string]Report{"r1": {At: after, Replayed: 500, Received: 500}, "r2": {At: after, Replayed: 400, Received: 600}}, 600, true},
		{"a replica that never streamed holds what it replayed", true,
			map[string]Report{"r1": {At: after, Replayed: 500, Received: 500}, "r2": {At: after, Replayed: 800}}, 800, true},
		{"replayed past what it received (its own WAL)", true,
			map[string]Report{"r1": {At: after, Replayed: 900, Received: 500}}, 900, true},
		{"nothing held anywhere", true,
			map[string]Report{"r1": {At: after}}, 0, false},
	} {
		o := &Outage{sync: tc.sync, reports: tc.reports}
		got, ok := o.Position(since)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: Position = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestOutageStale(t *testing.T) {
	o := &Outage{reports: map[string]Report{"r1": {At: outageAt(150)}, "r2": {At: outageAt(100)}}}
	since := outageAt(100)
	for addr, want := range map[string]bool{"r1": false, "r2": true, "p": false} {
		if got := o.Stale(addr, since); got != want {
			t.Errorf("Stale(%s) = %v, want %v", addr, got, want)
		}
	}
}

// TestBookThroughAnOutage follows the Book through a primary's crash: the
// probes of a synchronous primary and two replicas, a write, the crash,
// the looks the reads take at the replicas, and the promotion of one of
// them. Each step says whether the Book reports a change, and the
// position a read pinned by the write must then find replayed.
func TestBookThroughAnOutage(t *testing.T) {
	b := NewBook(8, 50*time.Millisecond)
	wrote := outageAt(1000)
	type want struct {
		changed bool
		pos     LSN
		ok      bool
	}
	steps := []struct {
		name string
		do   func() bool
		want want
	}{
		{"the primary, synchronous", func() bool { return b.Primary("p", 1000, outageAt(0), true) }, want{true, 0, false}},
		{"r1 probed before the write", func() bool {
			return b.Replica("r1", Report{At: outageAt(500), Replayed: 900, Received: 1000, Receiving: true})
		}, want{true, 0, false}},
		{"r2 probed before the write", func() bool {
			return b.Replica("r2", Report{At: outageAt(600), Replayed: 800, Received: 1000, Receiving: true})
		}, want{true, 0, false}},
		{"the same probe answer again", func() bool {
			return b.Replica("r2", Report{At: outageAt(600), Replayed: 800, Received: 1000, Receiving: true})
		}, want{false, 0, false}},
		// The primary crashes after the write; a read looks at r1.
		{"a look at r1 after the write", func() bool {
			return b.Look("r1", Report{At: outageAt(1100), Replayed: 1300, Received: 1300})
		}, want{true, 0, false}},
		{"a look at r2 after the write: r2 received a little more", func() bool {
			return b.Look("r2", Report{At: outageAt(1110), Replayed: 1000, Received: 1350})
		}, want{true, 1350, true}},
		{"an older look never lowers a replay position nor replaces a newer look", func() bool {
			return b.Look("r2", Report{At: outageAt(1050), Replayed: 900, Received: 1200})
		}, want{false, 1350, true}},
		{"r2 replays on", func() bool { return b.Raise("r2", 1350) }, want{true, 1350, true}},
		{"a look at a host the Book does not know as a replica", func() bool {
			return b.Look("p", Report{At: outageAt(1120), Replayed: 5000, Received: 5000})
		}, want{false, 1350, true}},
		{"r1's probe fails: what it held is no longer counted", func() bool { return b.Unknown("r1") }, want{true, 1350, true}},
		{"r2 promoted, probed as the new primary", func() bool { return b.Primary("r2", 1400, outageAt(1200), false) }, want{true, 0, false}},
	}
	for _, s := range steps {
		if got := s.do(); got != s.want.changed {
			t.Errorf("%s: changed = %v, want %v", s.name, got, s.want.changed)
		}
		if pos, ok := b.Outage().Position(wrote); pos != s.want.pos || ok != s.want.ok {
			t.Errorf("%s: Position = %v, %v; want %v, %v", s.name, pos, ok, s.want.pos, s.want.ok)
		}
	}
	if b.Outage().Sync() {
		t.Error("the new primary was probed asynchronous, the Outage says synchronous")
	}
}

// TestOutageIsASnapshot: an Outage the Book returned does not change when
// the Book does.
func TestOutageIsASnapshot(t *testing.T) {
	b := NewBook(8, 50*time.Millisecond)
	b.Primary("p", 100, outageAt(0), true)
	b.Replica("r1", Report{At: outageAt(10), Replayed: 100, Received: 100})
	o := b.Outage()
	b.Replica("r1", Report{At: outageAt(20), Replayed: 200, Received: 200})
	b.Primary("p", 300, outageAt(30), false)
	if pos, ok := o.Position(outageAt(5)); pos != 100 || !ok || !o.Sync() {
		t.Fatalf("the Outage changed with the Book: Position %v, %v, Sync %v", pos, ok, o.Sync())
	}
}

func TestOutageReadsString(t *testing.T) {
	for o, want := range map[OutageReads]string{OutageReplica: "replica", OutageWait: "wait", OutageReads(7): "OutageReads(7)"} {
		if got := o.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", o, got, want)
		}
	}
}
