package replica_test

import (
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/replica"
)

// TestSampler: which sample satisfies a read pinned by a write, and who
// asks the primary for one; on a fake clock.
func TestSampler(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	var s replica.Sampler
	need := func(addr string, wrote time.Time, want replica.Step) (replica.Sample, <-chan struct{}) {
		t.Helper()
		got, step, wait := s.Need(addr, wrote)
		if step != want {
			t.Fatalf("Need(%s, %v) = %v, want %v", addr, wrote.Sub(time.Unix(1000, 0)), step, want)
		}
		if (wait != nil) != (step == replica.Wait) {
			t.Fatalf("Need(%s) step %v with channel %v", addr, step, wait)
		}
		return got, wait
	}

	// No sample yet: the first read asks, the others wait for it.
	wrote := clk.Now()
	clk.Advance(time.Millisecond)
	need("a", wrote, replica.Ask)
	_, wait := need("a", wrote, replica.Wait)
	asked := clk.Now()
	clk.Advance(time.Millisecond)
	s.Answer("a", replica.Sample{LSN: 100, At: asked}, true)
	select {
	case <-wait:
	default:
		t.Fatal("the answer did not wake the waiting read")
	}
	if got, _ := need("a", wrote, replica.Use); got.LSN != 100 {
		t.Fatalf("sample %v, want the answer's", got)
	}

	// A write after the sample was asked for: the sample does not cover it.
	wrote2 := clk.Now()
	need("a", wrote2, replica.Ask)
	// A read waiting on that request whose write is older uses its answer;
	// meanwhile the old sample still covers the old write.
	if got, _ := need("a", wrote, replica.Use); got.LSN != 100 {
		t.Fatalf("old write: sample %v", got)
	}
	s.Answer("a", replica.Sample{}, false) // the request failed
	need("a", wrote2, replica.Ask)         // the next read asks again
	s.Answer("a", replica.Sample{LSN: 150, At: clk.Now()}, true)
	need("a", wrote2, replica.Ask) // taken at the same instant as the write: not after it
	clk.Advance(time.Millisecond)
	s.Answer("a", replica.Sample{LSN: 160, At: clk.Now()}, true)
	if got, _ := need("a", wrote2, replica.Use); got.LSN != 160 {
		t.Fatalf("sample %v, want 160", got)
	}

	// A probe's sample counts as well, and an older one replaces nothing.
	clk.Advance(time.Millisecond)
	wrote3 := clk.Now()
	clk.Advance(time.Millisecond)
	s.Observe("a", replica.Sample{LSN: 170, At: clk.Now()})
	s.Observe("a", replica.Sample{LSN: 120, At: wrote})
	if got, _ := need("a", wrote3, replica.Use); got.LSN != 170 {
		t.Fatalf("sample %v, want the probe's 170", got)
	}

	// Another primary: nothing of the old one is compared with it.
	need("b", wrote3, replica.Ask)
	s.Answer("a", replica.Sample{LSN: 999, At: clk.Now()}, true) // a late answer of the old primary
	need("b", wrote3, replica.Ask)
	s.Answer("b", replica.Sample{LSN: 50, At: clk.Now()}, true)
	if got, _ := need("b", wrote3, replica.Use); got.LSN != 50 {
		t.Fatalf("new primary's sample %v, want 50", got)
	}
}
