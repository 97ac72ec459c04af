package clock

import (
	"testing"
	"time"
)

func TestFake(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := NewFake(start)
	a, b := f.NewTimer(time.Second), f.NewTimer(3*time.Second)
	stopped := f.NewTimer(2 * time.Second)
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop: want true, then false")
	}
	f.Advance(999 * time.Millisecond)
	select {
	case <-a.C():
		t.Fatal("fired early")
	default:
	}
	f.Advance(time.Millisecond)
	if got := <-a.C(); !got.Equal(start.Add(time.Second)) {
		t.Fatalf("fired at %v", got)
	}
	if f.Timers() != 1 {
		t.Fatalf("%d timers waiting, want 1", f.Timers())
	}
	f.Advance(5 * time.Second)
	<-b.C()
	if !f.Now().Equal(start.Add(6 * time.Second)) {
		t.Fatalf("Now %v", f.Now())
	}
	select {
	case <-f.NewTimer(0).C():
	default:
		t.Fatal("a timer of 0 must fire at once")
	}
}
