package backoff

import (
	"context"
	"errors"
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
