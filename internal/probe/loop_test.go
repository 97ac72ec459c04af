package probe

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/internal/clock"
)

// TestSleepUntilHearsAPendingHint: a probe loop whose next probe is
// already due (a watched replica, whose watches follow each other without
// a pause) still learns of a hint that came meanwhile, and one with no
// hint pending goes on at once.
func TestSleepUntilHearsAPendingHint(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	hint := make(chan struct{}, 1)
	l := Loop{Clock: clk, Hint: hint}
	ctx := context.Background()
	past := clk.Now().Add(-time.Millisecond)

	if got := l.sleepUntil(ctx, past, nil); got != timeUp {
		t.Fatalf("due, no hint: %v, want timeUp", got)
	}
	hint <- struct{}{}
	if got := l.sleepUntil(ctx, past, nil); got != hinted {
		t.Fatalf("due, hint pending: %v, want hinted", got)
	}
	if got := l.sleepUntil(ctx, past, nil); got != timeUp {
		t.Fatalf("due, hint taken: %v, want timeUp", got)
	}

	ended, cancel := context.WithCancel(ctx)
	cancel()
	hint <- struct{}{}
	if got := l.sleepUntil(ended, past, nil); got != stopped {
		t.Fatalf("due, loop stopped, hint pending: %v, want stopped", got)
	}
}

// loopHost is a Host whose probes the test answers.
type loopHost struct {
	wake    chan struct{}
	waiting atomic.Bool
	probes  chan chan error // each probe hands the test a channel for its error
}

func (h *loopHost) Wake() <-chan struct{} { return h.wake }
func (h *loopHost) Wait() Wait {
	if h.waiting.Load() {
		return Wait{Waiting: true, Since: time.Unix(1000, 0)}
	}
	return Wait{}
}
func (h *loopHost) ClaimedPrimary() bool { return false }
func (h *loopHost) Watchable() bool      { return false }
func (h *loopHost) InUse() bool          { return true }
func (h *loopHost) Probe(ctx context.Context, _ Plan, _ bool) Finding {
	answer := make(chan error)
	select {
	case h.probes <- answer:
	case <-ctx.Done():
		return FindingOf(ctx.Err())
	}
	return FindingOf(<-answer)
}

// TestLoop drives a probe loop on a fake clock: it probes every Idle,
// at once on a hint and when the first call waits, and stops with its
// context.
func TestLoop(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	hint := make(chan struct{}, 1)
	h := &loopHost{wake: make(chan struct{}), probes: make(chan chan error)}
	l := Loop{Schedule: Schedule{Idle: time.Second, WaitMax: 50 * time.Millisecond, Rand: func(n int64) int64 { return n - 1 }}, Clock: clk, Hint: hint, Host: h}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { l.Run(ctx) })
	defer wg.Wait()
	defer cancel()

	// sleeping waits until the loop sleeps on a timer.
	sleeping := func() {
		t.Helper()
		waitTimer(t, clk, "the loop never slept")
	}
	expectProbe := func(step string) {
		t.Helper()
		select {
		case answer := <-h.probes:
			answer <- nil
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no probe", step)
		}
	}

	sleeping()
	clk.Advance(999 * time.Millisecond)
	// Advance fires the timers that are due before it returns: the loop's
	// is still waiting only if its probe is not due yet.
	if clk.Timers() != 1 {
		t.Fatal("before Idle: the loop's timer fired")
	}
	clk.Advance(time.Millisecond)
	expectProbe("after Idle")

	sleeping()
	hint <- struct{}{}
	expectProbe("on a hint")

	sleeping()
	h.waiting.Store(true)
	close(h.wake)
	expectProbe("when the first call waits")
}

// TestFirstSettlesCredentialsOnOneHost: the first probes run one host at
// a time until a server settles the credentials; a refusal stops them
// before another host sees the password; an unreachable host passes the
// turn at once, and a silent one after FirstLead.
func TestFirstSettlesCredentialsOnOneHost(t *testing.T) {
	refusal := &pgconn.PgError{Code: "28P01"}
	unreachable := errors.New("dial tcp: connection refused")
	for _, tc := range []struct {
		name        string
		errs        []error
		wantRan     int
		wantRefused int
	}{
		{"first logs in, the rest in parallel", []error{nil, nil, nil}, 3, -1},
		{"refused on the first", []error{refusal, nil, nil}, 1, 0},
		{"unreachable passes the turn", []error{unreachable, refusal, nil}, 2, 1},
		{"none reachable", []error{unreachable, unreachable, unreachable}, 3, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1000, 0))
			var mu sync.Mutex
			var order []int
			ran, refused := First(clk, len(tc.errs), func(i int) error {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				return tc.errs[i]
			}, func(int) bool { return true })
			if ran != tc.wantRan || refused != tc.wantRefused {
				t.Errorf("ran %d, refused %d; want %d, %d (order %v)", ran, refused, tc.wantRan, tc.wantRefused, order)
			}
			if len(order) != tc.wantRan {
				t.Errorf("%d probes ran, want %d", len(order), tc.wantRan)
			}
		})
	}

	// A host whose server says nothing keeps the next one waiting only
	// FirstLead.
	clk := clock.NewFake(time.Unix(1000, 0))
	release := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	started := make(chan int, 2)
	done := make(chan [2]int)
	go func() {
		ran, refused := First(clk, 2, func(i int) error {
			started <- i
			<-release[i]
			return nil
		}, func(int) bool { return false })
		done <- [2]int{ran, refused}
	}()
	if i := receive(t, started, "the first probe"); i != 0 {
		t.Fatalf("host %d probed first", i)
	}
	waitTimer(t, clk, "First never waited for the silent host")
	clk.Advance(FirstLead)
	if i := receive(t, started, "the second probe"); i != 1 {
		t.Fatalf("host %d probed second", i)
	}
	close(release[0])
	close(release[1])
	if got := receive(t, done, "First's return"); got != [2]int{2, -1} {
		t.Errorf("a silent host: ran, refused = %v, want [2 -1]", got)
	}
}

// waitTimer waits, up to 10 s, until something sleeps on one of clk's
// timers, and fails the test with msg otherwise.
func waitTimer(t *testing.T, clk *clock.Fake, msg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clk.Timers() == 0 {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(time.Millisecond)
	}
}

// receive returns the next value on ch, failing the test after 10 s.
func receive[V any](t *testing.T, ch <-chan V, what string) V {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
		panic("unreachable")
	}
}
