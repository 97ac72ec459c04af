package failover_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// connPort returns the port of the server conn talks to.
func connPort(ctx context.Context, conn *pgxpool.Conn) (int, error) {
	var port int
	err := conn.QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port)
	return port, err
}

// acquireAll acquires n connections from pp at once, so that the pool
// holds n of them, and returns each one's server port.
func acquireAll(ctx context.Context, pp *pgxpool.Pool, n int) ([]int, error) {
	var ports []int
	var conns []*pgxpool.Conn
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		conn, err := pp.Acquire(ctx)
		if err != nil {
			return ports, err
		}
		conns = append(conns, conn)
		port, err := connPort(ctx, conn)
		if err != nil {
			return ports, err
		}
		ports = append(ports, port)
	}
	return ports, nil
}

func TestPgxPoolFollowsPrimaryThroughSwitchover(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	old, next := c.Primary(), c.Nodes()[1]
	// The replica first: the connection string's order must not matter.
	pool := newPool(t, ctx, c.ConnStringFor([]*failovertest.Node{next, old}, "pool_max_conns=4"))
	pp := pool.PgxPool()
	if pool.PgxPool() != pp {
		t.Fatal("PgxPool returned a second pool")
	}

	ports, err := acquireAll(ctx, pp, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p != old.Port() {
			t.Fatalf("a connection went to port %d, want the primary's %d", p, old.Port())
		}
	}
	// Idle connections that pass the checks are reused, not replaced.
	if _, err := acquireAll(ctx, pp, 4); err != nil {
		t.Fatal(err)
	}
	if n := pp.Stat().NewConnsCount(); n != 4 {
		t.Fatalf("PgxPool opened %d connections for two rounds of 4, want 4", n)
	}
	// One connection stays checked out across the switchover, as
	// database/sql or a LISTEN loop would keep it.
	held, err := pp.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := c.Switchover(ctx, next); err != nil {
		t.Fatal(err)
	}
	held.Release()

	// Every connection handed out from now on is the new primary's. A
	// connect may fail while the Pool learns of the promotion; it must
	// never succeed on the old primary.
	var failed int
	ok := 0
	deadline := time.Now().Add(30 * time.Second)
	for ok < 50 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d rounds succeeded on the new primary (%d failed)", ok, failed)
		}
		ports, err := acquireAll(ctx, pp, 4)
		for _, p := range ports {
			if p == old.Port() {
				t.Fatalf("after the switchover a connection went to the old primary (port %d)", p)
			}
		}
		if err != nil {
			failed++
			t.Logf("round failed: %v", err)
			continue
		}
		var readOnly bool
		if err := pp.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&readOnly); err != nil || readOnly {
			t.Fatalf("PgxPool's connection is not on a primary: in recovery %v, %v", readOnly, err)
		}
		ok++
	}
	t.Logf("%d rounds failed while the Pool learnt of the promotion", failed)
}

func TestPgxPoolClosedWithPool(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	pool, err := failover.New(ctx, c.ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	pp := pool.PgxPool()
	if err := pp.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	idle := pool.AcquireAllIdle(ctx)
	for _, conn := range idle {
		conn.Release()
	}
	pool.Close()
	if err := pp.Ping(ctx); err == nil {
		t.Fatal("PgxPool still works after the Pool closed")
	}
	if err := pool.PgxPool().Ping(ctx); err == nil {
		t.Fatal("PgxPool works after the Pool closed")
	}
}

func TestPgxPoolFirstCalledAfterClose(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	pool, err := failover.New(ctx, c.ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	if err := pool.PgxPool().Ping(ctx); err == nil {
		t.Fatal("a PgxPool made after Close works")
	}
}

func TestAcquireAllIdle(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	pool := newPool(t, ctx, c.ConnString("pool_max_conns=3"))
	var conns []*pgxpool.Conn
	for range 3 {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	for _, conn := range conns {
		conn.Release()
	}
	idle := pool.AcquireAllIdle(ctx)
	if len(idle) != 3 {
		t.Errorf("AcquireAllIdle returned %d connections, want 3", len(idle))
	}
	if got := pool.Stat().AcquiredConns(); got != int32(len(idle)) {
		t.Errorf("AcquiredConns = %d, want %d", got, len(idle))
	}
	for _, conn := range idle {
		conn.Release()
	}
}

// PoolStat must stay the whole method set of *pgxpool.Stat.
func TestPoolStatIsPgxpoolStat(t *testing.T) {
	want := reflect.TypeFor[*pgxpool.Stat]()
	have := reflect.TypeFor[failover.PoolStat]()
	for i := range want.NumMethod() {
		m := want.Method(i)
		if _, ok := have.MethodByName(m.Name); !ok {
			t.Errorf("failover.PoolStat lacks %s, which *pgxpool.Stat has", m.Name)
		}
	}
}

// TestPgxPoolConnectRefusedWaitsForAnotherHost: a new connection of
// PgxPool's that its host refuses before the session is ready (57P03 from
// a server shutting down) goes to the next host that can take it, as the
// Pool's own calls do, instead of failing the caller's Acquire.
func TestPgxPoolConnectRefusedWaitsForAnotherHost(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := pgtest.Start(t, pgtest.Options{Replicas: 1})
	old, next := c.Primary(), c.Replicas()[0]
	pool := newPool(t, ctx, c.ConnString(""))
	pp := pool.PgxPool()

	// A session held open keeps a smart shutdown going: the server refuses
	// every new connection with 57P03 and still answers the Pool's probe
	// as a primary.
	held, err := old.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- old.Stop(ctx, pgtest.Smart) }()
	waitUntil(t, 30*time.Second, "the old primary to refuse new connections", func() bool {
		conn, err := old.Connect(ctx)
		if err == nil {
			conn.Close(ctx)
			return false
		}
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == "57P03"
	})
	if err := c.Promote(ctx, next); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	conn, err := pp.Acquire(ctx)
	if err != nil {
		t.Fatalf("PgxPool's Acquire while the old primary refuses connections: %v", err)
	}
	t.Logf("Acquire took %v", time.Since(start).Round(time.Millisecond))
	port, err := connPort(ctx, conn)
	conn.Release()
	if err != nil || port != next.Port() {
		t.Fatalf("connected to port %d (%v), want the new primary's %d", port, err, next.Port())
	}

	// The smart shutdown ends once its last sessions, the held one and
	// the Pool's probe, are gone.
	held.Close(ctx)
	pool.Close()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// TestPgxPoolConnectRefusedUntilTheBudgetEnds: while the only host refuses
// new connections, PgxPool's Acquire tries again within
// failover_max_duration and then fails with ErrBudgetExhausted, the
// server's refusal among its causes.
func TestPgxPoolConnectRefusedUntilTheBudgetEnds(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := pgtest.Start(t, pgtest.Options{})
	n := c.Primary()
	pool := newPool(t, ctx, c.ConnString("failover_max_duration=1s"))
	pp := pool.PgxPool()

	held, err := n.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- n.Stop(ctx, pgtest.Smart) }()
	waitUntil(t, 30*time.Second, "the server to refuse new connections", func() bool {
		conn, err := n.Connect(ctx)
		if err == nil {
			conn.Close(ctx)
			return false
		}
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == "57P03"
	})

	_, err = pp.Acquire(ctx)
	var pgErr *pgconn.PgError
	switch {
	case !errors.Is(err, failover.ErrBudgetExhausted):
		t.Errorf("Acquire: %v; want ErrBudgetExhausted", err)
	case !errors.As(err, &pgErr) || pgErr.Code != "57P03":
		t.Errorf("Acquire: %v; want the server's 57P03 among the causes", err)
	case strings.Contains(err.Error(), c.Password()):
		t.Errorf("the error holds the password: %v", err)
	}
	t.Logf("Acquire: %v", err)

	held.Close(ctx)
	pool.Close()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// TestPgxPoolCancelRequestReachesItsServer: a statement of a PgxPool
// connection whose context ends is cancelled on its own server (pgconn
// dials the cancel request through the connection's DialFunc), and its
// host stays usable.
func TestPgxPoolCancelRequestReachesItsServer(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	pool := newPool(t, ctx, c.ConnString(""))
	pp := pool.PgxPool()
	for range 3 {
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		_, err := pp.Exec(short, "SELECT pg_sleep(30)")
		cancel()
		if err == nil {
			t.Fatal("pg_sleep(30) under a 200ms deadline returned no error")
		}
		t.Logf("pg_sleep(30) under a 200ms deadline: %v after %v", err, time.Since(start).Round(time.Millisecond))
		// Only a cancel request stops pg_sleep on the server: a closed
		// client connection leaves it sleeping.
		waitUntil(t, 10*time.Second, "the sleeping statement to be cancelled on the server", func() bool {
			var n int
			err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)' AND state = 'active'").Scan(&n)
			return err == nil && n == 0
		})
	}
	var port int
	if err := pp.QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port); err != nil || port != c.Primary().Port() {
		t.Fatalf("after the cancels: port %d, %v; want the primary's %d", port, err, c.Primary().Port())
	}
	if st := hostStat(t, pool, c.Primary().Addr()); st.State != hosthealth.Healthy {
		t.Fatalf("the primary is %v after cancelled statements, want Healthy", st.State)
	}
}
