package hostpool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/internal/clock"
)

var closeStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// waitFor polls cond until it holds, failing the test after ten seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// isClosed reports whether c is closed, without waiting.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// closer returns a function that closes c once, and has the test close
// it at its end if it has not, so that no goroutine waits on it after a
// failure.
func closer(t *testing.T, c chan struct{}) func() {
	f := sync.OnceFunc(func() { close(c) })
	t.Cleanup(f)
	return f
}

// startAwait runs awaitClosed on clk and closed in the background. It
// returns a channel closed when awaitClosed has returned, and the number
// of times it has called its cut.
func startAwait(clk clock.Clock, closed <-chan struct{}) (returned <-chan struct{}, cuts *atomic.Int32) {
	done := make(chan struct{})
	cuts = new(atomic.Int32)
	go func() {
		defer close(done)
		awaitClosed(clk, closed, func() { cuts.Add(1) })
	}()
	return done, cuts
}

// awaitToGrace starts awaitClosed on a fake clock, on a channel that the
// returned finish closes, and moves the clock to a nanosecond before
// closeGrace, failing t unless it still waits on its timer then, having
// cut nothing.
func awaitToGrace(t *testing.T) (clk *clock.Fake, finish func(), returned <-chan struct{}, cuts *atomic.Int32) {
	t.Helper()
	clk = clock.NewFake(closeStart)
	closed := make(chan struct{})
	finish = closer(t, closed)
	returned, cuts = startAwait(clk, closed)
	waitFor(t, "the grace timer", func() bool { return clk.Timers() == 1 })
	clk.Advance(closeGrace - time.Nanosecond)
	if clk.Timers() != 1 || cuts.Load() != 0 || isClosed(returned) {
		t.Fatalf("a nanosecond before closeGrace: %d timers waiting, %d cuts, returned %v; want 1, 0, false",
			clk.Timers(), cuts.Load(), isClosed(returned))
	}
	return clk, finish, returned, cuts
}

// TestAwaitClosed: Close's wait on the fake clock. What it waits for is
// given closeGrace to finish: it is cut only once the clock has passed
// closeGrace, and waited for still after the cut. Nothing is cut, and no
// timer is left, when it finishes in time or had already finished.
func TestAwaitClosed(t *testing.T) {
	t.Run("finished", func(t *testing.T) {
		clk := clock.NewFake(closeStart)
		closed := make(chan struct{})
		close(closed)
		returned, cuts := startAwait(clk, closed)
		waitFor(t, "awaitClosed to return", func() bool { return isClosed(returned) })
		if n := cuts.Load(); n != 0 {
			t.Errorf("cut %d times, want none", n)
		}
		if n := clk.Timers(); n != 0 {
			t.Errorf("%d timers left waiting, want none", n)
		}
	})

	t.Run("in time", func(t *testing.T) {
		clk, finish, returned, cuts := awaitToGrace(t)
		finish()
		waitFor(t, "awaitClosed to return", func() bool { return isClosed(returned) })
		if n := cuts.Load(); n != 0 {
			t.Errorf("cut %d times, want none", n)
		}
		if n := clk.Timers(); n != 0 {
			t.Errorf("%d timers left waiting, want the grace timer stopped", n)
		}
	})

	t.Run("grace passes", func(t *testing.T) {
		clk, finish, returned, cuts := awaitToGrace(t)
		clk.Advance(time.Nanosecond)
		waitFor(t, "the cut at closeGrace", func() bool { return cuts.Load() == 1 })
		if isClosed(returned) {
			t.Fatal("awaitClosed returned after the cut, before what it waits for finished")
		}
		finish()
		waitFor(t, "awaitClosed to return", func() bool { return isClosed(returned) })
		if n := cuts.Load(); n != 1 {
			t.Errorf("cut %d times, want once", n)
		}
	})
}

// unconnectedPool returns a pgxpool that has opened no connection, and
// opens none unless asked; beforeConnect, when not nil, is its
// BeforeConnect.
func unconnectedPool(t *testing.T, beforeConnect func(context.Context, *pgx.ConnConfig) error) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig("host=127.0.0.1 port=1 user=test dbname=test connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	cfg.BeforeConnect = beforeConnect
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestClosePools: ClosePools on the fake clock. With nothing in flight
// it returns with the clock standing still and leaves no timer. With a
// following pool's connect in progress it keeps its grace timer until
// the clock passes closeGrace, and still waits for that connect after.
func TestClosePools(t *testing.T) {
	t.Run("nothing in flight", func(t *testing.T) {
		clk := clock.NewFake(closeStart)
		s := &Set{cfg: Config{Clock: clk}}
		h := &Host{Calls: unconnectedPool(t, nil), Reads: unconnectedPool(t, nil)}
		following := unconnectedPool(t, nil)
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			s.ClosePools([]*Host{h}, following)
		}()
		waitFor(t, "ClosePools to return", func() bool { return isClosed(returned) })
		if n := clk.Timers(); n != 0 {
			t.Errorf("%d timers left waiting, want none", n)
		}
	})

	t.Run("connect in flight", func(t *testing.T) {
		clk := clock.NewFake(closeStart)
		s := &Set{cfg: Config{Clock: clk}}
		entered, release := make(chan struct{}), make(chan struct{})
		finish := closer(t, release)
		errReleased := errors.New("released")
		following := unconnectedPool(t, func(context.Context, *pgx.ConnConfig) error {
			close(entered)
			<-release
			return errReleased
		})
		acquired := make(chan error, 1)
		go func() {
			c, err := following.Acquire(context.Background())
			if c != nil {
				c.Release()
			}
			acquired <- err
		}()
		<-entered

		returned := make(chan struct{})
		go func() {
			defer close(returned)
			s.ClosePools(nil, following)
		}()
		waitFor(t, "the grace timer", func() bool { return clk.Timers() == 1 })
		clk.Advance(closeGrace - time.Nanosecond)
		if clk.Timers() != 1 || isClosed(returned) {
			t.Fatalf("a nanosecond before closeGrace: %d timers waiting, returned %v; want 1, false", clk.Timers(), isClosed(returned))
		}
		clk.Advance(time.Nanosecond)
		if n := clk.Timers(); n != 0 {
			t.Fatalf("at closeGrace: %d timers waiting, want the grace timer fired", n)
		}
		if isClosed(returned) {
			t.Fatal("ClosePools returned with a connect in flight")
		}
		finish()
		waitFor(t, "ClosePools to return", func() bool { return isClosed(returned) })
		if err := <-acquired; !errors.Is(err, errReleased) {
			t.Errorf("Acquire: %v, want the BeforeConnect's error", err)
		}
	})
}
