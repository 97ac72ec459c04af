package failover_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
)

// orphaned is a Pool over a primary and its replica, with a table writes
// replicated to both, whose primary is about to be killed.
type orphaned struct {
	c         *failovertest.Cluster
	old, next *failovertest.Node
	pool      *failover.Pool
	admin     *pgx.Conn // to the replica, as its superuser
}

// newOrphaned starts the cluster and the Pool (params added to the
// connection string).
func newOrphaned(t *testing.T, ctx context.Context, params string) *orphaned {
	t.Helper()
	c := failovertest.Start(t)
	o := &orphaned{c: c, old: c.Primary(), next: c.Replicas()[0]}
	o.pool = newPool(t, ctx, c.ConnString(params))
	if _, err := o.pool.Exec(ctx, "CREATE TABLE writes (id bigint)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	admin, err := o.next.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	o.admin = admin
	return o
}

// killAndWait kills the primary and starts exec, which waits for a primary
// then; its error comes on the channel returned.
func (o *orphaned) killAndWait(t *testing.T, ctx context.Context, exec func() error) <-chan error {
	t.Helper()
	if err := o.old.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- exec() }()
	return done
}

// insert is a write through the Pool.
func (o *orphaned) insert(ctx context.Context) func() error {
	return func() error {
		_, err := o.pool.Exec(ctx, "INSERT INTO writes VALUES (1)")
		return err
	}
}

// promote promotes the replica and waits for exec's outcome, which must be
// a success.
func (o *orphaned) promote(t *testing.T, ctx context.Context, done <-chan error) {
	t.Helper()
	if err := o.c.Promote(ctx, o.next); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the call after the promotion: %v", err)
	}
}

// TestWaitingPoolWatchesTheReplica: while a write waits for a primary, the
// replica's probe waits on the replica itself (a backend sleeping in
// pg_sleep, checking whether it was promoted) instead of asking again and
// again; when the replica is promoted, the watch answers and the write
// goes through.
func TestWaitingPoolWatchesTheReplica(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	o := newOrphaned(t, ctx, "")
	done := o.killAndWait(t, ctx, o.insert(ctx))
	waitUntil(t, time.Minute, "the replica's probe sleeping on the replica", func() bool {
		var n int
		err := o.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event = 'PgSleep' AND query LIKE '%generate_series%' AND pid <> pg_backend_pid()`).Scan(&n)
		return err == nil && n == 1
	})
	select {
	case err := <-done:
		t.Fatalf("the write ended before any primary was there: %v", err)
	default:
	}
	o.promote(t, ctx, done)
	if s := hostStat(t, o.pool, o.next.Addr()); s.Role != hosthealth.RolePrimary {
		t.Errorf("the promoted replica is %v/%v, want it known as the primary", s.State, s.Role)
	}
}

// TestRefusedWatchFallsBackToProbing: a server that cancels the watch (a
// statement_timeout shorter than it) is probed without one, on the same
// connection, and its promotion is seen all the same; the refusal is not
// counted against the host.
func TestRefusedWatchFallsBackToProbing(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	o := newOrphaned(t, ctx, "statement_timeout=20")
	// probeBackends are the replica's sessions whose last statement was
	// the probe's question (it reads the pgfailover.zone setting).
	probeBackends := func() []int {
		t.Helper()
		rows, err := o.admin.Query(ctx, `SELECT pid FROM pg_stat_activity
			WHERE backend_type = 'client backend' AND client_addr IS NOT NULL
			AND query LIKE '%pgfailover.zone%' ORDER BY pid`)
		if err != nil {
			t.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			t.Fatal(err)
		}
		return pids
	}
	// A replica the Pool does not use holds no connection of its between
	// probes; once calls wait, the probe holds one there.
	if got := probeBackends(); len(got) != 0 {
		t.Fatalf("probe sessions on the replica before the crash: %v, want none", got)
	}
	done := o.killAndWait(t, ctx, o.insert(ctx))
	var probeConn []int
	waitUntil(t, time.Minute, "the probe's session on the replica while the write waits", func() bool {
		probeConn = probeBackends()
		return len(probeConn) == 1
	})
	// The watch is cancelled after 20ms; the probes that follow it are
	// answered at once.
	before := hostStat(t, o.pool, o.next.Addr()).Probes
	waitUntil(t, time.Minute, "the replica probed while the write waits", func() bool {
		return hostStat(t, o.pool, o.next.Addr()).Probes >= before+5
	})
	if got := probeBackends(); !slices.Contains(got, probeConn[0]) {
		t.Errorf("TCP sessions on the replica while the write waits: %v, want the probe's %v among them still: a refused watch must not cost the connection", got, probeConn)
	}
	if s := hostStat(t, o.pool, o.next.Addr()); s.State != hosthealth.TopologyReject || s.Role != hosthealth.RoleReplica {
		t.Errorf("the replica is %v/%v while the write waits, want topology-reject/replica: a refused watch is no failure", s.State, s.Role)
	}
	o.promote(t, ctx, done)
}

// TestPromotionFindsAConnectionReady: while a write waits for a primary,
// the replica gets one connection in the Pool's calls pool ahead of its
// promotion, and the write goes through on it once the replica is
// promoted, without another login.
func TestPromotionFindsAConnectionReady(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	o := newOrphaned(t, ctx, "")
	done := o.killAndWait(t, ctx, o.insert(ctx))
	waitUntil(t, time.Minute, "a connection to the replica ready for its promotion", func() bool {
		p := hostStat(t, o.pool, o.next.Addr()).Pool
		return p.TotalConns() == 1 && p.IdleConns() == 1
	})
	o.promote(t, ctx, done)
	if got := hostStat(t, o.pool, o.next.Addr()).Pool.NewConnsCount(); got != 1 {
		t.Errorf("%d connections opened to the new primary for one write, want the one opened ahead of the promotion", got)
	}
}

// TestEachWaitingWriteFindsAConnectionReady: writes that start to wait
// one after another, while the replica's probe is inside a watch, each get
// a connection opened on the replica ahead of its promotion, and all go
// through on those once it is promoted, without another login.
func TestEachWaitingWriteFindsAConnectionReady(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	o := newOrphaned(t, ctx, "")
	done := []<-chan error{o.killAndWait(t, ctx, o.insert(ctx))}
	for n := 1; n <= 3; n++ {
		waitUntil(t, time.Minute, "a connection to the replica ready for each waiting write", func() bool {
			p := hostStat(t, o.pool, o.next.Addr()).Pool
			return p.TotalConns() == int32(n) && p.IdleConns() == int32(n)
		})
		if n < 3 {
			next := make(chan error, 1)
			go func() { next <- o.insert(ctx)() }()
			done = append(done, next)
		}
	}
	if err := o.c.Promote(ctx, o.next); err != nil {
		t.Fatal(err)
	}
	for i, d := range done {
		if err := <-d; err != nil {
			t.Fatalf("write %d after the promotion: %v", i, err)
		}
	}
	if got := hostStat(t, o.pool, o.next.Addr()).Pool.NewConnsCount(); got != 3 {
		t.Errorf("%d connections opened to the new primary for three writes, want the three opened ahead of the promotion", got)
	}
}

// TestReadyConnectionsPrepareTheWaitingStatements: while writes wait for
// a primary, the connection opened on the replica ahead of its promotion
// prepares their statements, also that of a write which began to wait
// once the connection was open (failover_ready_conns=1: no other is
// opened for it); once the replica is promoted, each write goes through
// once.
func TestReadyConnectionsPrepareTheWaitingStatements(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	o := newOrphaned(t, ctx, "failover_ready_conns=1")
	write := func(sql string) func() error {
		return func() error {
			_, err := o.pool.Exec(ctx, sql)
			return err
		}
	}
	const first, second = "INSERT INTO writes VALUES (1)", "INSERT INTO writes VALUES (2)"
	done := []<-chan error{o.killAndWait(t, ctx, write(first))}
	o.waitPrepared(t, ctx, first, 1)
	next := make(chan error, 1)
	go func() { next <- write(second)() }()
	done = append(done, next)
	o.waitPrepared(t, ctx, second, 1)

	if err := o.c.Promote(ctx, o.next); err != nil {
		t.Fatal(err)
	}
	for i, d := range done {
		if err := <-d; err != nil {
			t.Fatalf("write %d after the promotion: %v", i+1, err)
		}
	}
	var n, sum int
	if err := o.pool.QueryRow(ctx, "SELECT count(*), coalesce(sum(id), 0) FROM writes").Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 2 || sum != 3 {
		t.Errorf("the table holds %d rows summing to %d, want the two writes once each", n, sum)
	}
}

// waitPrepared waits until n sessions on the replica, other than the
// admin's, last ran sql.
func (o *orphaned) waitPrepared(t *testing.T, ctx context.Context, sql string, n int) {
	t.Helper()
	waitUntil(t, time.Minute, fmt.Sprintf("%d sessions on the replica that prepared %q", n, sql), func() bool {
		var got int
		err := o.admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND pid <> pg_backend_pid()", sql).Scan(&got)
		if err != nil {
			t.Fatal(err)
		}
		return got == n
	})
}

// TestReadyConnectionClosedWhenNoPromotionCame: the connection opened on
// the replica for a promotion is closed once the old primary is back and
// no call waits: the replica's calls pool, which only a primary may use,
// is left empty.
func TestReadyConnectionClosedWhenNoPromotionCame(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	o := newOrphaned(t, ctx, "")
	done := o.killAndWait(t, ctx, func() error {
		_, err := o.pool.Exec(ctx, "SELECT 1")
		return err
	})
	waitUntil(t, time.Minute, "a connection to the replica ready for its promotion", func() bool {
		return hostStat(t, o.pool, o.next.Addr()).Pool.TotalConns() == 1
	})
	if err := o.old.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the call once the primary was back: %v", err)
	}
	waitUntil(t, time.Minute, "the ready connection to the replica closed", func() bool {
		return hostStat(t, o.pool, o.next.Addr()).Pool.TotalConns() == 0
	})
	if s := hostStat(t, o.pool, o.next.Addr()); s.Role != hosthealth.RoleReplica {
		t.Errorf("the replica is %v/%v, want it still known as a replica", s.State, s.Role)
	}
}

// TestPgxPoolWaitOpensNoReadyConnection: a call through PgxPool() that
// waits for a primary connects through a pool of its own, so the replica
// is watched for it but gets no connection in the Pool's calls pool.
func TestPgxPoolWaitOpensNoReadyConnection(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	o := newOrphaned(t, ctx, "")
	pgxp := o.pool.PgxPool()
	done := o.killAndWait(t, ctx, func() error {
		_, err := pgxp.Exec(ctx, "SELECT 1")
		return err
	})
	o.checkNoReadyConnection(t)
	o.promote(t, ctx, done)
}

// TestReadyConnsZeroOpensNone: with failover_ready_conns=0 a waiting write
// gets no connection opened on the replica ahead of its promotion, and
// goes through after it all the same.
func TestReadyConnsZeroOpensNone(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	o := newOrphaned(t, ctx, "failover_ready_conns=0")
	done := o.killAndWait(t, ctx, o.insert(ctx))
	o.checkNoReadyConnection(t)
	o.promote(t, ctx, done)
}

// checkNoReadyConnection waits for two probes of the replica after the old
// primary is known down (the probe loop would have asked for ready
// connections before the first), then checks that the replica's calls
// pool holds none.
func (o *orphaned) checkNoReadyConnection(t *testing.T) {
	t.Helper()
	waitUntil(t, time.Minute, "the old primary known down", func() bool {
		return hostStat(t, o.pool, o.old.Addr()).State == hosthealth.TransportError
	})
	before := hostStat(t, o.pool, o.next.Addr()).Probes
	waitUntil(t, time.Minute, "two probes of the replica", func() bool {
		return hostStat(t, o.pool, o.next.Addr()).Probes >= before+2
	})
	if n := hostStat(t, o.pool, o.next.Addr()).Pool.TotalConns(); n != 0 {
		t.Errorf("%d connections in the replica's calls pool, want none", n)
	}
}

// TestFencedPrimaryRefusesOneWriteOnly: a primary fenced read-only by its
// configuration refuses a write, and the write waits for a primary. The
// fenced server, the only one, is then the likeliest to become writable,
// so a connection is opened there for that moment. Its login reports
// in_hot_standby=off, which does not show the fence: it must not make the
// server a primary again, or the write would be sent to it once more.
// When the call gives up, it closes that connection.
func TestFencedPrimaryRefusesOneWriteOnly(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	inserts := &statementCounter{prefix: "INSERT"}
	reader, _, pool := newObservedPool(t, ctx, c.ConnString("health_probe_interval=1h&failover_max_duration=2s&failover_ready_conns=1"),
		func(cfg *failover.Config) { cfg.ConnConfig.Tracer = inserts })
	if _, err := pool.Exec(ctx, "CREATE TABLE writes (id bigint)"); err != nil {
		t.Fatal(err)
	}
	primary := c.Primary()
	fence(t, ctx, primary)

	_, err := pool.Exec(ctx, "INSERT INTO writes VALUES (1)")
	if !errors.Is(err, failover.ErrNoHost) {
		t.Fatalf("write to a fenced primary: want ErrNoHost, got %v", err)
	}
	if n := inserts.n.Load(); n != 1 {
		t.Errorf("the write was sent %d times, want once: %v", n, err)
	}
	if n := sum(points(t, ctx, reader), "pgfailover.connection.attempts", "host", primary.Addr(), "pgfailover.pool.purpose", "calls"); n < 2 {
		t.Errorf("%v connections opened to the primary, want the write's and one ready for its return", n)
	}
	// Closed by the call that gave up, not by a later probe, and counted
	// as what it was.
	if n := hostStat(t, pool, primary.Addr()).Pool.IdleConns(); n != 0 {
		t.Errorf("%d idle connections left to the fenced primary once the call gave up", n)
	}
	if n := sum(points(t, ctx, reader), "pgfailover.connection.closed", "host", primary.Addr(), "pgfailover.close.reason", "not_promoted"); n < 1 {
		t.Errorf("%v connections counted closed as not_promoted, want the one opened ready for a promotion", n)
	}
}

// statementCounter is a pgx tracer that counts the statements sent that
// begin with prefix.
type statementCounter struct {
	prefix string
	n      atomic.Int32
}

func (s *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, s.prefix) {
		s.n.Add(1)
	}
	return ctx
}

func (s *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
