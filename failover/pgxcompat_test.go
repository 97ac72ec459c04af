package failover_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// These tests hold the Pool to what pgx's own pgxpool tests expect of a
// *pgxpool.Pool.

// TestQueryRowScanPanicReleasesConnection: a Scan that panics (a typed nil
// in dest, pgx issue 1628) gives its connection back, so the Pool's only
// connection serves the next call and Close returns.
func TestQueryRowScanPanicReleasesConnection(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	ctx := testContext(t)
	pool, err := failover.New(ctx, c.ConnString("pool_max_conns=1"))
	if err != nil {
		t.Fatal(err)
	}
	row := pool.QueryRow(ctx, "SELECT 'Hello, world!'")
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Scan into a typed nil did not panic")
			}
		}()
		var greeting *string
		_ = row.Scan(greeting)
	}()
	var greeting string
	if err := row.Scan(&greeting); err == nil {
		t.Errorf("a second Scan of the row whose Scan panicked succeeded (%q)", greeting)
	}

	// The pool's one connection is free again.
	short, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var n int
	if err := pool.QueryRow(short, "SELECT 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the next QueryRow: %d, %v", n, err)
	}
	closed := make(chan struct{})
	go func() { pool.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close still waits for the connection of the Scan that panicked")
	}
}

// acquireTracer counts pgxpool's acquire trace calls.
type acquireTracer struct {
	starts, ends atomic.Int32
	lastErr      atomic.Pointer[error]
}

func (a *acquireTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (a *acquireTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (a *acquireTracer) TraceAcquireStart(ctx context.Context, pool *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	if pool != nil {
		a.starts.Add(1)
	}
	return ctx
}

func (a *acquireTracer) TraceAcquireEnd(_ context.Context, pool *pgxpool.Pool, data pgxpool.TraceAcquireEndData) {
	if pool != nil {
		a.ends.Add(1)
	}
	err := data.Err
	a.lastErr.Store(&err)
}

// TestTraceAcquireWithEndedContext: an Acquire whose context has already
// ended still reaches the acquire tracer, start and end, with the error,
// as in pgxpool's TestTraceAcquire.
func TestTraceAcquireWithEndedContext(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	ctx := testContext(t)
	cfg, err := failover.ParseConfig(c.ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	tracer := &acquireTracer{}
	cfg.ConnConfig.Tracer = tracer
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn.Release()
	if tracer.starts.Load() != 1 || tracer.ends.Load() != 1 {
		t.Fatalf("after an Acquire: %d starts, %d ends, want 1 and 1", tracer.starts.Load(), tracer.ends.Load())
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := pool.Acquire(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with an ended context: %v, want context.Canceled", err)
	}
	if tracer.starts.Load() != 2 || tracer.ends.Load() != 2 {
		t.Fatalf("after an Acquire with an ended context: %d starts, %d ends, want 2 and 2", tracer.starts.Load(), tracer.ends.Load())
	}
	if p := tracer.lastErr.Load(); p == nil || !errors.Is(*p, context.Canceled) {
		t.Fatalf("the tracer's end saw no context error")
	}
}
