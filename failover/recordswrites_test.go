package failover

import (
	"context"
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
	if m := p.classes.known.Load(); m != nil {
		t.Errorf("without a Reader, the successes were classified: %v", *m)
	}
	if n := p.lastWrite.Load(); n != 0 {
		t.Errorf("without a Reader, a write was timed: %d", n)
	}

	p.Reader()
	taken := p.lastWrite.Load()
	if taken == 0 {
		t.Fatal("the first Reader call after calls did not count as a write")
	}
	run()
	if m := p.classes.known.Load(); m == nil || len(*m) != 2 {
		t.Errorf("with a Reader, the successes were not classified: %v", m)
	}
	if n := p.lastWrite.Load(); n <= taken {
		t.Errorf("with a Reader, the write was not timed: %d, before %d", n, taken)
	}
}
