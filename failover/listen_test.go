package failover_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// TestListenAcrossFailover listens on the primary, loses it (killed and a
// replica promoted, or switched over and rejoined as a standby): the next
// Next reports the gap with its times and the new server, and a
// notification sent after the failover is received.
func TestListenAcrossFailover(t *testing.T) {
	skipUnderShort(t)
	drills := map[string]func(*failovertest.Cluster, context.Context, *failovertest.Node) error{
		"kill and promote": func(c *failovertest.Cluster, ctx context.Context, to *failovertest.Node) error {
			return failoverTo(ctx, c, to)
		},
		"switchover": func(c *failovertest.Cluster, ctx context.Context, to *failovertest.Node) error {
			_, err := c.Switchover(ctx, to)
			return err
		},
	}
	for name, drill := range drills {
		t.Run(name, func(t *testing.T) { testListenAcross(t, drill) })
	}
}

func testListenAcross(t *testing.T, drill func(*failovertest.Cluster, context.Context, *failovertest.Node) error) {
	ctx := testContext(t)
	c := failovertest.Start(t)
	pool := newPool(t, ctx, c.ConnString("pool_max_conns=2"))
	l, err := pool.Listen(ctx, "jobs", "Mixed Case")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	receive := func(want string) {
		t.Helper()
		n, err := l.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if n.Payload != want {
			t.Fatalf("received %q on %q, want %q", n.Payload, n.Channel, want)
		}
	}
	if _, err := pool.Exec(ctx, `NOTIFY "Mixed Case", 'before'`); err != nil {
		t.Fatal(err)
	}
	receive("before")

	next := c.Nodes()[1]
	lost := time.Now()
	if err := drill(c, ctx, next); err != nil {
		t.Fatal(err)
	}
	_, err = l.Next(ctx)
	gap, ok := errors.AsType[*failover.GapError](err)
	if !ok || !errors.Is(err, failover.ErrListenGap) {
		t.Fatalf("Next after the failover returned %v, want a *GapError", err)
	}
	if gap.Addr != next.Addr() {
		t.Errorf("listening again on %s, want the new primary %s", gap.Addr, next.Addr())
	}
	if gap.Since.After(lost) || gap.Lost.Before(lost) || gap.Regained.Before(gap.Lost) {
		t.Errorf("gap since %v, lost %v, regained %v; the primary was lost at %v", gap.Since, gap.Lost, gap.Regained, lost)
	}
	if gap.Cause == nil {
		t.Error("the gap has no cause")
	}
	t.Logf("%v", gap)

	if _, err := pool.Exec(ctx, "NOTIFY jobs, 'after'"); err != nil {
		t.Fatal(err)
	}
	receive("after")
}

// TestListenNextHonoursContext: a Next whose context ends returns its error
// and leaves the session listening.
func TestListenNextHonoursContext(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	pool := newPool(t, ctx, c.ConnString(""))
	l, err := pool.Listen(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := l.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with an ended context: %v", err)
	}
	if _, err := pool.Exec(ctx, "NOTIFY jobs, 'x'"); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Next(ctx); err != nil || n.Payload != "x" {
		t.Fatalf("Next after a timeout: %v, %v", n, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Next(ctx); !errors.Is(err, failover.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if _, err := pool.Listen(ctx); err == nil {
		t.Fatal("Listen without a channel succeeded")
	}
}

// TestListenerClosesWithPool: Pool.Close ends a Listener's session (its
// backend is gone from the server when Close returns, or soon after), and
// Next then returns ErrClosed, even with a notification sent meanwhile,
// and also when it was waiting as the Pool closed.
func TestListenerClosesWithPool(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	admin, err := c.Primary().Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	sessions := func(app string) int {
		t.Helper()
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("idle", func(t *testing.T) {
		pool, l := listenOnCh(t, ctx, c.ConnString("application_name=listen-idle"))
		pool.Close()
		if _, err := admin.Exec(ctx, "NOTIFY ch, 'after close'"); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if n, err := l.Next(short); !errors.Is(err, failover.ErrClosed) {
			t.Errorf("Next after Pool.Close returned %v, %v; want ErrClosed", n, err)
		}
		waitUntil(t, 30*time.Second, "the listener's session to end with the Pool", func() bool { return sessions("listen-idle") == 0 })
		if err := l.Close(); err != nil {
			t.Errorf("Close after Pool.Close: %v", err)
		}
	})

	t.Run("waiting", func(t *testing.T) {
		pool, l := listenOnCh(t, ctx, c.ConnString("application_name=listen-waiting"))
		next := make(chan error, 1)
		go func() {
			_, err := l.Next(ctx)
			next <- err
		}()
		pool.Close()
		select {
		case err := <-next:
			if !errors.Is(err, failover.ErrClosed) {
				t.Fatalf("Next waiting when the Pool closed returned %v, want ErrClosed", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Next still waits after Pool.Close")
		}
		waitUntil(t, 30*time.Second, "the listener's session to end with the Pool", func() bool { return sessions("listen-waiting") == 0 })
	})
}

// listenOnCh opens a Pool on dsn and a Listener on channel "ch"; both
// close when the test ends.
func listenOnCh(t *testing.T, ctx context.Context, dsn string) (*failover.Pool, *failover.Listener) {
	t.Helper()
	pool := newPool(t, ctx, dsn)
	l, err := pool.Listen(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return pool, l
}

// TestListenGivesUpOnAWrongPassword: a Listener whose session is lost
// after its password changed does not retry a failure that no retry can
// mend: Next returns the authentication failure, not its context's end.
func TestListenGivesUpOnAWrongPassword(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	if err := c.Primary().Exec(ctx, "CREATE ROLE listener LOGIN PASSWORD 'pw-one-7f3'"); err != nil {
		t.Fatal(err)
	}
	dsn := strings.Replace(c.ConnString(""), "postgres:"+c.Password()+"@", "listener:pw-one-7f3@", 1)
	if !strings.Contains(dsn, "listener:pw-one-7f3@") {
		t.Fatalf("could not put the role in the connection string")
	}
	_, l := listenOnCh(t, ctx, dsn)
	if err := c.Primary().Exec(ctx, "ALTER ROLE listener PASSWORD 'pw-two-9c1'"); err != nil {
		t.Fatal(err)
	}
	if err := c.Primary().Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'listener'"); err != nil {
		t.Fatal(err)
	}
	next, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := l.Next(next)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
		t.Fatalf("Next after the password changed: want 28P01, got %v", err)
	}
	if strings.Contains(err.Error(), "pw-one-7f3") {
		t.Errorf("the password is in the error: %v", err)
	}
}
