package lograte

import (
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/internal/clock"
)

func TestLimiterOnePerKeyPerInterval(t *testing.T) {
	c := clock.NewFake(time.Unix(1000, 0))
	l := New(10*time.Second, c)

	if ok, n := l.Allow("a"); !ok || n != 0 {
		t.Fatalf("first line: ok=%v suppressed=%d", ok, n)
	}
	for i := range 5 {
		c.Advance(time.Second)
		if ok, _ := l.Allow("a"); ok {
			t.Fatalf("line %d within the interval passed", i)
		}
	}
	// Another key has its own interval.
	if ok, n := l.Allow("b"); !ok || n != 0 {
		t.Fatalf("other key: ok=%v suppressed=%d", ok, n)
	}
	c.Advance(4 * time.Second) // 9 s after the first line
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("a line 9 s after the last passed")
	}
	c.Advance(time.Second) // 10 s
	if ok, n := l.Allow("a"); !ok || n != 6 {
		t.Fatalf("after the interval: ok=%v suppressed=%d, want true 6", ok, n)
	}
	c.Advance(10 * time.Second)
	if ok, n := l.Allow("a"); !ok || n != 0 {
		t.Fatalf("after a quiet interval: ok=%v suppressed=%d, want true 0", ok, n)
	}
}

func TestLimiterBoundsItsKeys(t *testing.T) {
	c := clock.NewFake(time.Unix(1000, 0))
	l := New(time.Minute, c)
	for i := range maxKeys + 10 {
		l.Allow(string(rune('a' + i)))
	}
	if n := len(l.keys); n > maxKeys {
		t.Fatalf("%d keys kept, want at most %d", n, maxKeys)
	}
}

// TestLimiterForget: a forgotten key passes at once, with nothing counted
// from before; other keys keep their interval.
func TestLimiterForget(t *testing.T) {
	c := clock.NewFake(time.Unix(1000, 0))
	l := New(time.Minute, c)
	l.Allow("a")
	l.Allow("b")
	l.Allow("a") // held back
	l.Forget("a")
	if ok, n := l.Allow("a"); !ok || n != 0 {
		t.Fatalf("after Forget: ok=%v suppressed=%d, want a line with none held back", ok, n)
	}
	if ok, _ := l.Allow("b"); ok {
		t.Fatal("Forget(a) let b through within its interval")
	}
}
