package flight

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait fails the test unless ch closes within a generous deadline.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

// waiters waits until the run under way counts n callers.
func waiters[T any](t *testing.T, g *Group[T], n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := g.Waiting()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers joined the run, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCallersShareOneRun(t *testing.T) {
	var g Group[int]
	var runs atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{})
	fn := func(context.Context) (int, error) {
		if runs.Add(1) == 1 {
			close(started)
		}
		<-release
		return 7, nil
	}
	const callers = 5
	var wg sync.WaitGroup
	results := make(chan int, callers)
	wg.Go(func() {
		v, _ := g.Do(context.Background(), fn)
		results <- v
	})
	wait(t, started, "the first run")
	for range callers - 1 {
		wg.Go(func() {
			v, _ := g.Do(context.Background(), fn)
			results <- v
		})
	}
	waiters(t, &g, callers)
	close(release)
	wg.Wait()
	close(results)
	for v := range results {
		if v != 7 {
			t.Fatalf("a caller got %d, want 7", v)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the work ran %d times, want 1", n)
	}
	// A caller after the run has ended starts a new one.
	if _, err := g.Do(context.Background(), func(context.Context) (int, error) { return 0, errors.New("second") }); err == nil || err.Error() != "second" {
		t.Fatalf("a later caller got %v, want the new run's error", err)
	}
}

func TestTheLastCallerToLeaveCancelsTheRun(t *testing.T) {
	var g Group[int]
	started := make(chan struct{})
	ended := make(chan struct{})
	fn := func(ctx context.Context) (int, error) {
		close(started)
		<-ctx.Done()
		close(ended)
		return 0, ctx.Err()
	}
	first, cancelFirst := context.WithCancel(context.Background())
	second, cancelSecond := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() { _, err := g.Do(first, fn); errs <- err }()
	wait(t, started, "the run")
	go func() { _, err := g.Do(second, fn); errs <- err }()
	waiters(t, &g, 2)

	cancelFirst()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that left got %v, want context.Canceled", err)
	}
	select {
	case <-ended:
		t.Fatal("the run was cancelled while a caller still waited for it")
	default:
	}

	cancelSecond()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the last caller got %v, want context.Canceled", err)
	}
	select {
	case <-ended: // the last caller returned only once the run had ended
	default:
		t.Fatal("the last caller returned before the run it cancelled had ended")
	}
}

func TestAStartedRunOutlivesItsCallers(t *testing.T) {
	var g Group[struct{}]
	var wg sync.WaitGroup
	release := make(chan struct{})
	cancelled := make(chan struct{}, 1)
	fn := func(ctx context.Context) (struct{}, error) {
		select {
		case <-release:
		case <-ctx.Done():
			cancelled <- struct{}{}
		}
		return struct{}{}, nil
	}
	done := g.Start(context.Background(), wg.Go, fn)
	if again := g.Start(context.Background(), wg.Go, fn); again != done {
		t.Fatal("a second Start began another run while one was under way")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	if _, err := g.Do(ctx, fn); !errors.Is(err, context.Canceled) {
		t.Fatalf("a caller that gave up got %v, want context.Canceled", err)
	}
	close(release)
	wait(t, done, "the started run")
	wg.Wait()
	select {
	case <-cancelled:
		t.Fatal("a caller of Do leaving cancelled a run begun by Start")
	default:
	}
}

func TestStartIsBoundByItsContext(t *testing.T) {
	var g Group[struct{}]
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	done := g.Start(ctx, wg.Go, func(ctx context.Context) (struct{}, error) {
		<-ctx.Done()
		return struct{}{}, nil
	})
	cancel()
	wait(t, done, "the run's end once its context ended")
	wg.Wait()
}
