package replica_test

import (
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/replica"
)

// TestSampler: which sample satisfies a read pinned by a write, and who
// asks the primary for one, as a table of events on a fake clock. Times
// are milliseconds on the clock; each event happens at its own time.
func TestSampler(t *testing.T) {
	const (
		need    = "need"    // a read pinned by the write at wrote asks what to do
		answer  = "answer"  // the request in flight is answered (ok: with lsn, asked at asked)
		observe = "observe" // a probe of the primary found lsn at asked
	)
	type event struct {
		at     int // ms
		op     string
		addr   string
		wrote  int // need: when the write completed
		lsn    replica.LSN
		asked  int // answer, observe: when the position was asked for
		ok     bool
		want   replica.Step // need
		wantAt replica.LSN  // need with Use: the sample's position
	}
	for _, tc := range []struct {
		name   string
		events []event
	}{
		{"first read asks, the others wait, then all use the answer", []event{
			{at: 1, op: need, addr: "a", wrote: 0, want: replica.Ask},
			{at: 1, op: need, addr: "a", wrote: 0, want: replica.Wait},
			{at: 2, op: answer, addr: "a", lsn: 100, asked: 1, ok: true},
			{at: 2, op: need, addr: "a", wrote: 0, want: replica.Use, wantAt: 100},
		}},
		{"a sample taken before the write does not serve it", []event{
			{at: 1, op: observe, addr: "a", lsn: 100, asked: 1},
			{at: 3, op: need, addr: "a", wrote: 2, want: replica.Ask},
			{at: 3, op: need, addr: "a", wrote: 0, want: replica.Use, wantAt: 100}, // an older write: the old sample does
		}},
		{"a sample taken at the instant of the write does not serve it", []event{
			{at: 2, op: observe, addr: "a", lsn: 100, asked: 2},
			{at: 3, op: need, addr: "a", wrote: 2, want: replica.Ask},
		}},
		{"a request that asked before a later write: that read asks again after it", []event{
			{at: 1, op: need, addr: "a", wrote: 0, want: replica.Ask},
			{at: 2, op: need, addr: "a", wrote: 2, want: replica.Wait},
			{at: 3, op: answer, addr: "a", lsn: 100, asked: 1, ok: true},
			{at: 3, op: need, addr: "a", wrote: 2, want: replica.Ask},
		}},
		{"a failed request: the next read asks", []event{
			{at: 1, op: need, addr: "a", wrote: 0, want: replica.Ask},
			{at: 2, op: answer, addr: "a", ok: false},
			{at: 2, op: need, addr: "a", wrote: 0, want: replica.Ask},
		}},
		{"a probe's sample serves, an older one replaces nothing", []event{
			{at: 5, op: observe, addr: "a", lsn: 170, asked: 5},
			{at: 6, op: observe, addr: "a", lsn: 120, asked: 1},
			{at: 6, op: need, addr: "a", wrote: 4, want: replica.Use, wantAt: 170},
		}},
		{"a position of zero (unknown) is no sample", []event{
			{at: 5, op: observe, addr: "a", lsn: 0, asked: 5},
			{at: 6, op: need, addr: "a", wrote: 4, want: replica.Ask},
		}},
		{"another primary: nothing of the old one serves", []event{
			{at: 5, op: observe, addr: "a", lsn: 170, asked: 5},
			{at: 6, op: need, addr: "b", wrote: 4, want: replica.Ask},
			{at: 7, op: answer, addr: "a", lsn: 999, asked: 6, ok: true}, // a late answer of the old primary
			{at: 7, op: need, addr: "b", wrote: 4, want: replica.Ask},
			{at: 8, op: answer, addr: "b", lsn: 50, asked: 7, ok: true},
			{at: 8, op: need, addr: "b", wrote: 4, want: replica.Use, wantAt: 50},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(1000, 0)
			ms := func(n int) time.Time { return start.Add(time.Duration(n) * time.Millisecond) }
			clk := clock.NewFake(start)
			var s replica.Sampler
			var waiting []<-chan struct{}
			for i, e := range tc.events {
				if d := ms(e.at).Sub(clk.Now()); d > 0 {
					clk.Advance(d)
				}
				switch e.op {
				case need:
					got, step, wait := s.Need(e.addr, ms(e.wrote))
					if step != e.want || step == replica.Use && got.LSN != e.wantAt {
						t.Fatalf("event %d: Need(%s, wrote %dms) = %v %v, want %v %v", i, e.addr, e.wrote, step, got.LSN, e.want, e.wantAt)
					}
					if (wait != nil) != (step == replica.Wait) {
						t.Fatalf("event %d: step %v with channel %v", i, step, wait)
					}
					if wait != nil {
						waiting = append(waiting, wait)
					}
				case answer:
					s.Answer(e.addr, replica.Sample{LSN: e.lsn, At: ms(e.asked)}, e.ok)
					for _, w := range waiting {
						select {
						case <-w:
						default:
							t.Fatalf("event %d: the answer did not wake a waiting read", i)
						}
					}
					waiting = nil
				case observe:
					s.Observe(e.addr, replica.Sample{LSN: e.lsn, At: ms(e.asked)})
				}
			}
		})
	}
}

// TestPinned: which reads a write pins.
func TestPinned(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name  string
		pin   time.Duration
		wrote time.Time
		want  bool
	}{
		{"no write", time.Second, time.Time{}, false},
		{"just written", time.Second, now, true},
		{"inside the bound", time.Second, now.Add(-999 * time.Millisecond), true},
		{"at the bound", time.Second, now.Add(-time.Second), false},
		{"pin off", 0, now, false},
	} {
		rt := replica.Router{Policy: replica.Policy{PinAfterWrite: tc.pin}}
		if got := rt.Pinned(replica.Read{Now: now, LastWrite: tc.wrote}); got != tc.want {
			t.Errorf("%s: Pinned = %v, want %v", tc.name, got, tc.want)
		}
	}
}
