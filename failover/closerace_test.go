package failover_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// errorKind names the typed error err is, or "" when it is none the Pool
// documents. Sentinels come first: a *HostError or *FailoverError wraps one.
func errorKind(err error) string {
	for _, s := range []struct {
		name string
		err  error
	}{
		{"ErrClosed", failover.ErrClosed},
		{"ErrCommitOutcomeUnknown", failover.ErrCommitOutcomeUnknown},
		{"ErrTxInterrupted", failover.ErrTxInterrupted},
		{"ErrNoHost", failover.ErrNoHost},
		{"ErrBudgetExhausted", failover.ErrBudgetExhausted},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	var he *failover.HostError
	if errors.As(err, &he) {
		return "*HostError"
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return "*pgconn.PgError " + pe.Code
	}
	return ""
}

// Close racing with calls in flight and with a failover: Close is called
// twice at once while goroutines run Exec, QueryRow, Begin+Commit and Query
// over many rows and the primary is lost. Nothing panics, every call
// returns, every error is one the Pool documents, every call begun after
// Close returned fails with ErrClosed, Close returns, and no goroutine is
// left.
func TestCloseRacingCallsAndFailover(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	old, replica := c.Primary(), c.Replicas()[0]
	before := goleak.IgnoreCurrent()

	pool, err := failover.New(ctx, c.ConnString("pool_max_conns=4"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE close_race (id bigint, worker int)"); err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		op          string
		err         error
		afterClose  bool // begun after Close returned
		duringClose bool // begun after Close was called
	}
	var (
		closing, closedDone atomic.Bool
		ok                  atomic.Int64
		mu                  sync.Mutex // guards outcomes
		outcomes            []outcome
	)
	ops := []struct {
		name string
		run  func(ctx context.Context, w, i int) error
	}{
		{"Exec", func(ctx context.Context, w, i int) error {
			_, err := pool.Exec(ctx, "INSERT INTO close_race VALUES ($1, $2)", i, w)
			return err
		}},
		{"QueryRow", func(ctx context.Context, w, i int) error {
			var n int
			return pool.QueryRow(ctx, "SELECT $1::int + 1", i).Scan(&n)
		}},
		{"Begin+Commit", func(ctx context.Context, w, i int) error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO close_race VALUES ($1, $2)", i, w); err != nil {
				_ = tx.Rollback(ctx)
				return err
			}
			return tx.Commit(ctx)
		}},
		{"Query", func(ctx context.Context, w, i int) error {
			rows, err := pool.Query(ctx, "SELECT g FROM generate_series(1, 2000) g")
			if err != nil {
				return err
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				n++
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if n != 2000 {
				return fmt.Errorf("Query returned %d rows without an error, want 2000", n)
			}
			return nil
		}},
	}

	const perOp = 6
	stop := make(chan struct{})
	var workers sync.WaitGroup
	var panics atomic.Int64
	afterClose := make([]atomic.Int64, perOp*len(ops)) // calls per worker begun after Close returned
	for w := range perOp * len(ops) {
		op := ops[w%len(ops)]
		workers.Go(func() {
			defer func() {
				if r := recover(); r != nil {
					panics.Add(1)
					t.Errorf("%s panicked: %v", op.name, r)
				}
			}()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				o := outcome{op: op.name, afterClose: closedDone.Load(), duringClose: closing.Load()}
				o.err = op.run(ctx, w, i)
				if o.afterClose {
					afterClose[w].Add(1)
				}
				if o.err == nil {
					ok.Add(1)
					continue
				}
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			}
		})
	}
	t.Cleanup(func() {
		// On a failure below, the workers still stop, and the Pool
		// closes, before the cluster goes away.
		select {
		case <-stop:
		default:
			close(stop)
		}
		pool.Close()
		workers.Wait()
	})

	waitUntil(t, 30*time.Second, "calls to succeed before the failover", func() bool { return ok.Load() >= 200 })

	// Lose the primary and, while the replica is being promoted, close
	// the Pool from two goroutines at once.
	failedOver := make(chan error, 1)
	go func() { failedOver <- failoverTo(ctx, c, replica) }()
	waitUntil(t, 30*time.Second, "the old primary to stop", func() bool { return !old.Running() })

	closing.Store(true)
	var closers sync.WaitGroup
	for range 2 {
		closers.Go(pool.Close)
	}
	closed := make(chan struct{})
	go func() { closers.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatalf("Close did not return within 30s\n%s", allStacks())
	}
	closedDone.Store(true)

	// Let every worker make calls on the closed Pool, then stop them.
	waitUntil(t, 60*time.Second, "every worker to call the closed Pool", func() bool {
		for i := range afterClose {
			if afterClose[i].Load() < 3 {
				return false
			}
		}
		return true
	})
	close(stop)
	done := make(chan struct{})
	go func() { workers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("calls still running 60s after Close returned\n%s", allStacks())
	}
	if err := <-failedOver; err != nil {
		t.Fatalf("failover: %v", err)
	}

	kinds := map[string]int{}
	for _, o := range outcomes {
		k := errorKind(o.err)
		switch {
		case k == "":
			t.Errorf("%s (closing %v) returned an untyped error: %v", o.op, o.duringClose, o.err)
			k = "untyped"
		case o.afterClose && k != "ErrClosed":
			t.Errorf("%s begun after Close returned: %v, want ErrClosed", o.op, o.err)
		}
		when := "before Close"
		switch {
		case o.afterClose:
			when = "after Close"
		case o.duringClose:
			when = "during Close"
		}
		kinds[when+": "+o.op+": "+k]++
	}
	var lines []string
	for k, n := range kinds {
		lines = append(lines, fmt.Sprintf("%s ×%d", k, n))
	}
	sort.Strings(lines)
	t.Logf("%d calls succeeded; errors seen:\n\t%s", ok.Load(), strings.Join(lines, "\n\t"))
	if panics.Load() > 0 {
		t.Fatalf("%d panics", panics.Load())
	}

	pool.Close() // a third Close, after the others returned
	goleak.VerifyNone(t, before)
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
