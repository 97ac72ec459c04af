package backoff

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pgfailover/pgfailover/internal/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFullJitterBounds: each wait is drawn below a base that starts at the
// initial interval, doubles, stops at the maximum, and starts over at
// Reset.
func TestFullJitterBounds(t *testing.T) {
	b := NewFullJitter(50*time.Millisecond, 300*time.Millisecond)
	var bases []time.Duration
	b.rand = func(n int64) int64 {
		bases = append(bases, time.Duration(n))
		return n - 1 // the largest wait the draw can give
	}
	for range 5 {
		b.NextBackOff()
	}
	b.Reset()
	if got := b.NextBackOff(); got != 50*time.Millisecond-1 {
		t.Errorf("first wait after Reset = %v, want just under 50ms", got)
	}
	want := []time.Duration{50, 100, 200, 300, 300, 50}
	for i, w := range want {
		if bases[i] != w*time.Millisecond {
			t.Errorf("base %d = %v, want %v", i, bases[i], w*time.Millisecond)
		}
	}

	b = NewFullJitter(50*time.Millisecond, time.Second) // the real draw
	for range 100 {
		if d := b.NextBackOff(); d < 0 || d >= time.Second {
			t.Fatalf("wait %v outside [0, 1s)", d)
		}
	}
}

// TestExponentialBase: the base wait doubles with each failure in a row
// from the initial interval, stops at the cap, and does not overflow
// however many failures there were.
func TestExponentialBase(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name  string
		curve Exponential
		n     int
		want  time.Duration
	}{
		{"no failure counts as the first", Exponential{5 * ms, 500 * ms}, 0, 5 * ms},
		{"first failure", Exponential{5 * ms, 500 * ms}, 1, 5 * ms},
		{"second failure", Exponential{5 * ms, 500 * ms}, 2, 10 * ms},
		{"seventh failure", Exponential{5 * ms, 500 * ms}, 7, 320 * ms},
		{"eighth failure: the cap", Exponential{5 * ms, 500 * ms}, 8, 500 * ms},
		{"a million failures", Exponential{5 * ms, 500 * ms}, 1_000_000, 500 * ms},
		{"a cap near the largest duration", Exponential{time.Second, math.MaxInt64}, 100, math.MaxInt64},
		{"a cap below the initial interval", Exponential{time.Second, 300 * ms}, 1, 300 * ms},
		{"no initial interval", Exponential{0, time.Second}, 1_000_000, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.curve.Base(tt.n); got != tt.want {
				t.Errorf("Base(%d) = %v, want %v", tt.n, got, tt.want)
			}
		})
	}
}

// TestDraws: full jitter draws from [0, d), equal jitter from [d/2, d],
// both ends reached.
func TestDraws(t *testing.T) {
	low := func(int64) int64 { return 0 }
	high := func(n int64) int64 { return n - 1 }
	const d = 10 * time.Millisecond
	for _, tt := range []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"full, lowest draw", DrawFull(d, low), 0},
		{"full, highest draw", DrawFull(d, high), d - 1},
		{"full, no base", DrawFull(0, high), 0},
		{"equal, lowest draw", DrawEqual(d, low), d / 2},
		{"equal, highest draw", DrawEqual(d, high), d},
		{"equal, a base of 1ns", DrawEqual(1, high), 1},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	for range 100 {
		if w := DrawEqual(d, rand.Int64N); w < d/2 || w > d {
			t.Fatalf("equal draw %v outside [%v, %v]", w, d/2, d)
		}
	}
}

// TestWaitsOnTheClock: a wait ends when the policy's clock passes it, and
// not before; a context that ends, or a stop channel that closes, ends it
// at once.
func TestWaitsOnTheClock(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	w := Policy{Initial: time.Second, Max: time.Second, Clock: fake}.Start()
	w.b.rand = func(n int64) int64 { return n - 1 }

	done := make(chan error, 1)
	go func() { done <- w.Wait(context.Background(), nil) }()
	for fake.Timers() == 0 {
		time.Sleep(time.Millisecond)
	}
	fake.Advance(time.Second - 2)
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before its time", err)
	default:
	}
	fake.Advance(1)
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Wait(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with an ended context: %v", err)
	}
	stop := make(chan struct{})
	close(stop)
	if err := w.Wait(context.Background(), stop); !errors.Is(err, ErrStopped) {
		t.Errorf("Wait with stop closed: %v", err)
	}
	if n := fake.Timers(); n != 0 {
		t.Errorf("%d timers left waiting", n)
	}
}
