package failover

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// TestSuccessesUnrecordedWithoutAReader: a Pool whose Reader has not been
// asked for neither classifies its calls' successes nor times its writes
// (the calls carry no causal token); once Reader has been called, it does
// both.
func TestSuccessesUnrecordedWithoutAReader(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a PostgreSQL server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := pgtest.Start(t, pgtest.Options{})
	p, err := New(ctx, c.ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const write = "CREATE TEMP TABLE IF NOT EXISTS t (v int)"
	run := func() {
		t.Helper()
		var v int
		if err := p.QueryRow(ctx, "SELECT 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Exec(ctx, write); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if n := p.eng.Classified(); n != 0 {
		t.Errorf("without a Reader, the successes were classified: %d statements", n)
	}
	if w := p.eng.LastWrite(); !w.IsZero() {
		t.Errorf("without a Reader, a write was timed: %v", w)
	}

	p.Reader()
	taken := p.eng.LastWrite()
	if taken.IsZero() {
		t.Fatal("the first Reader call after calls did not count as a write")
	}
	run()
	if n := p.eng.Classified(); n != 2 {
		t.Errorf("with a Reader, the successes were not classified: %d statements, want 2", n)
	}
	if w := p.eng.LastWrite(); !w.After(taken) {
		t.Errorf("with a Reader, the write was not timed: %v, before %v", w, taken)
	}
}

// TestUnknownOutcomeTimesAWrite: a write whose outcome is unknown (its
// session ended under it) may have committed, so once the Reader is in
// use it is timed as a write that succeeded is: reads right after it are
// pinned to see it (pin_after_write).
func TestUnknownOutcomeTimesAWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a PostgreSQL server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := pgtest.Start(t, pgtest.Options{})
	p, err := New(ctx, c.ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Reader()
	if _, err := p.Exec(ctx, "CREATE TABLE t (v int)"); err != nil {
		t.Fatal(err)
	}
	before := p.eng.LastWrite()

	done := make(chan error, 1)
	go func() {
		_, err := p.Exec(ctx, "INSERT INTO t SELECT 1 FROM pg_sleep(30)")
		done <- err
	}()
	// The server ends the insert's session while it runs.
	var insertErr error
	deadline := time.Now().Add(30 * time.Second)
	for got := false; !got; {
		if time.Now().After(deadline) {
			t.Fatal("the insert's session was never ended")
		}
		if err := c.Primary().Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE query LIKE 'INSERT INTO t SELECT%' AND pid <> pg_backend_pid()`); err != nil {
			t.Fatal(err)
		}
		select {
		case insertErr = <-done:
			got = true
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !errors.Is(insertErr, ErrCommitOutcomeUnknown) {
		t.Fatalf("the insert ended with %v, want ErrCommitOutcomeUnknown", insertErr)
	}
	if w := p.eng.LastWrite(); !w.After(before) {
		t.Errorf("a write of unknown outcome was not timed: %v, before %v", w, before)
	}
}
