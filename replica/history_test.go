package replica_test

import (
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/replica"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestHistoryReached(t *testing.T) {
	h := replica.NewHistory(4)
	if _, ok := h.Reached(100); ok {
		t.Fatal("an empty history reached something")
	}
	for i, lsn := range []replica.LSN{100, 200, 250, 300} {
		h.Add(replica.Sample{LSN: lsn, At: at(i)})
	}
	for _, tc := range []struct {
		replayed replica.LSN
		want     time.Time
		ok       bool
	}{
		{0, time.Time{}, false},  // nothing replayed: unknown
		{99, time.Time{}, false}, // older than every sample kept
		{100, at(0), true},       // exactly the first sample
		{250, at(2), true},       // the newest sample at or below it
		{300, at(3), true},       // caught up
		{1000, at(3), true},      // ahead of the last sample (it moved on since)
	} {
		got, ok := h.Reached(tc.replayed)
		if ok != tc.ok || !got.Equal(tc.want) {
			t.Errorf("Reached(%d) = %v, %v; want %v, %v", tc.replayed, got, ok, tc.want, tc.ok)
		}
	}
}

func TestHistoryKeepsTheNewest(t *testing.T) {
	h := replica.NewHistory(3)
	for i := range 10 {
		h.Add(replica.Sample{LSN: replica.LSN(100 * (i + 1)), At: at(i)})
	}
	if h.Len() != 3 {
		t.Fatalf("Len = %d, want 3", h.Len())
	}
	if _, ok := h.Reached(700); ok {
		t.Error("a sample older than the three newest is still kept")
	}
	if got, ok := h.Reached(850); !ok || !got.Equal(at(7)) {
		t.Errorf("Reached(850) = %v, %v; want %v", got, ok, at(7))
	}
}

func TestHistoryIdlePrimaryFillsNothing(t *testing.T) {
	h := replica.NewHistory(4)
	h.Add(replica.Sample{LSN: 100, At: at(0)})
	for s := 1; s < 100; s++ {
		h.Add(replica.Sample{LSN: 200, At: at(s)})
	}
	if h.Len() != 2 {
		t.Fatalf("Len = %d, want 2", h.Len())
	}
	if got, ok := h.Reached(150); !ok || !got.Equal(at(0)) {
		t.Errorf("Reached(150) = %v, %v; want %v", got, ok, at(0))
	}
	if got, ok := h.Reached(200); !ok || !got.Equal(at(99)) {
		t.Errorf("Reached(200) = %v, %v; want %v", got, ok, at(99))
	}
}

func TestHistoryStartsAgainOnANewPrimary(t *testing.T) {
	h := replica.NewHistory(8)
	h.Add(replica.Sample{LSN: 500, At: at(0)})
	h.Add(replica.Sample{LSN: 400, At: at(1)}) // went back: another primary
	if h.Len() != 1 {
		t.Fatalf("Len = %d after a position went back, want 1", h.Len())
	}
	if got, ok := h.Reached(550); !ok || !got.Equal(at(1)) {
		t.Errorf("Reached(550) = %v, %v; want the new primary's sample at %v", got, ok, at(1))
	}
}

// TestBoundAgesWhileReceiverIsDown: the primary keeps writing, the replica
// replays nothing more; its bound grows with time alone.
func TestBoundAgesWhileReceiverIsDown(t *testing.T) {
	h := replica.NewHistory(16)
	rt := replica.Router{Policy: replica.Policy{MaxLag: 3 * time.Second}}
	replayed := replica.LSN(1000)
	for s := range 10 {
		h.Add(replica.Sample{LSN: replica.LSN(1000 + 100*s), At: at(s)})
		fresh, _ := h.Reached(replayed)
		c := replica.Candidate{Usable: true, Fresh: fresh, Replayed: replayed}
		bound, _ := c.Staleness(at(s))
		if want := time.Duration(s) * time.Second; bound != want {
			t.Fatalf("at %ds: bound %v, want %v", s, bound, want)
		}
		if got, want := rt.Eligible(&c, at(s)), s <= 3; got != want {
			t.Fatalf("at %ds: eligible %v, want %v", s, got, want)
		}
	}
}

// TestIdlePrimaryKeepsReplicasFresh: the primary's position does not
// move, so a replica that replayed it stays within a probe of now.
func TestIdlePrimaryKeepsReplicasFresh(t *testing.T) {
	h := replica.NewHistory(16)
	rt := replica.Router{Policy: replica.Policy{MaxLag: 2 * time.Second}}
	for s := range 60 {
		h.Add(replica.Sample{LSN: 5000, At: at(s)})
		fresh, _ := h.Reached(5000)
		c := replica.Candidate{Usable: true, Fresh: fresh, Replayed: 5000}
		// Checked just before the next sample: a whole probe interval old.
		if !rt.Eligible(&c, at(s).Add(time.Second)) {
			t.Fatalf("at %ds: a replica of an idle primary is not eligible", s)
		}
	}
}
