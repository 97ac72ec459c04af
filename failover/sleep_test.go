package failover

import (
	"context"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/internal/clock"
)

// TestSleepUntilHearsAPendingHint: a probe loop whose next probe is
// already due (a watched replica, whose watches follow each other without
// a pause) still learns of a hint that came meanwhile, and one with no
// hint pending goes on at once.
func TestSleepUntilHearsAPendingHint(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	p := &Pool{clock: clk}
	ctx := context.Background()
	past := clk.Now().Add(-time.Millisecond)

	hint := make(chan struct{}, 1)
	if got := p.sleepUntil(ctx, past, nil, hint); got != wakeTimeUp {
		t.Fatalf("due, no hint: %v, want wakeTimeUp", got)
	}
	hint <- struct{}{}
	if got := p.sleepUntil(ctx, past, nil, hint); got != wakeHint {
		t.Fatalf("due, hint pending: %v, want wakeHint", got)
	}
	if got := p.sleepUntil(ctx, past, nil, hint); got != wakeTimeUp {
		t.Fatalf("due, hint taken: %v, want wakeTimeUp", got)
	}

	stopped, cancel := context.WithCancel(ctx)
	cancel()
	hint <- struct{}{}
	if got := p.sleepUntil(stopped, past, nil, hint); got != wakeStopped {
		t.Fatalf("due, loop stopped, hint pending: %v, want wakeStopped", got)
	}
}
