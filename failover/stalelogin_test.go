package failover_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// closeWatch is a connection that records whether it was closed.
type closeWatch struct {
	net.Conn
	closed atomic.Bool
}

func (c *closeWatch) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

// TestLoginBegunBeforeAFailureIsRefused: a connection whose login was
// under way when the host failed is not handed out, since a server that
// is shutting down may let one more session in before it ends it too.
// The call that waited for it runs on a connection opened once the host
// answered again. Without the check, the late login marks the host
// healthy and its connection takes the call.
func TestLoginBegunBeforeAFailureIsRefused(t *testing.T) {
	c := failovertest.Start(t, failovertest.Replicas(0))
	ctx := testContext(t)
	cfg, err := failover.ParseConfig(c.Primary().ConnString("pool_max_conns=4"))
	if err != nil {
		t.Fatal(err)
	}
	// Once armed, the next dial waits for release before it connects.
	var armed atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	var late atomic.Pointer[closeWatch]
	next := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if !armed.CompareAndSwap(true, false) {
			return next(ctx, network, addr)
		}
		close(held)
		<-release
		conn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		w := &closeWatch{Conn: conn}
		late.Store(w)
		return w, nil
	}
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	// The pool's only connection is held, so the next call dials.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	armed.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, "SELECT 1")
		done <- err
	}()
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the call never dialled")
	}

	// While that login waits, a call fails on the host: its session ends
	// under it (57P01), a failover event.
	if _, err := pool.Exec(failover.NoRetry(ctx), "SELECT pg_terminate_backend(pg_backend_pid())"); err == nil {
		t.Fatal("a session that terminated itself reported success")
	}
	close(release)

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the call that waited for the late login: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call that waited for the late login never ended")
	}
	w := late.Load()
	if w == nil {
		t.Fatal("the held dial never connected")
	}
	waitUntil(t, 5*time.Second, "the late login's connection closed, not handed out", w.closed.Load)
}
