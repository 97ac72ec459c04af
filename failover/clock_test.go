package failover

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// TestBudgetRunsOnThePoolClock stops the only server and moves the Pool's
// clock past failover_max_duration: the waiting call gives up on that
// clock, long before the caller's own (real) deadline.
func TestBudgetRunsOnThePoolClock(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short; run: go test -race -run '^TestBudgetRunsOnThePoolClock$' ./failover/")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := pgtest.Start(t, pgtest.Options{})
	cfg, err := ParseConfig(c.ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	fake := clock.NewFake(time.Now())
	cfg.clock = fake
	pool, err := NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Primary().Stop(ctx, pgtest.Fast); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, "SELECT 1")
		done <- err
	}()
	waitFor := func(what string, cond func() bool) {
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s", what)
			case <-time.After(time.Millisecond):
			}
		}
	}
	waitFor("the call to wait for a usable host", func() bool { return pool.eng.Hosts.Waiting() == 1 })

	fake.Advance(cfg.MaxDuration - time.Second)
	select {
	case err := <-done:
		t.Fatalf("the call ended before its budget: %v", err)
	default:
	}
	fake.Advance(time.Second)
	select {
	case err := <-done:
		var fe *FailoverError
		if !errors.Is(err, ErrBudgetExhausted) || !errors.As(err, &fe) || fe.Cause != nil {
			t.Fatalf("want ErrBudgetExhausted with no cause from the caller, got %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the call did not give up when the Pool's clock passed its budget")
	}
}
