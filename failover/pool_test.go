package failover_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
)

// The interface sqlc generates for pgx/v5 (with :copyfrom and :batch
// queries), and the one pgx helpers such as pgx.CollectRows callers use.
type DBTX interface {
	Exec(context.Context, string, ...interface{}) (pgconn.CommandTag, error)
	Query(context.Context, string, ...interface{}) (pgx.Rows, error)
	QueryRow(context.Context, string, ...interface{}) pgx.Row
	CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error)
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}

var (
	_ DBTX = (*failover.Pool)(nil)
	_ DBTX = (*pgxpool.Pool)(nil)
	// pgx.BeginFunc and pgx.BeginTxFunc accept anything that can begin.
	_ interface {
		Begin(context.Context) (pgx.Tx, error)
		BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
	} = (*failover.Pool)(nil)
)

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newPool(t *testing.T, ctx context.Context, dsn string) *failover.Pool {
	t.Helper()
	pool, err := failover.New(ctx, dsn)
	if err != nil {
		t.Fatalf("failover.New: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// failoverTo crashes the primary and promotes to at once; the other
// running standbys follow it.
func failoverTo(ctx context.Context, c *failovertest.Cluster, to *failovertest.Node) error {
	if _, err := c.CrashPrimary(ctx); err != nil {
		return err
	}
	return c.Promote(ctx, to)
}

// serverPort returns the port of the server a pooled connection talks to.
func serverPort(t *testing.T, ctx context.Context, pool *failover.Pool) int {
	t.Helper()
	var port int
	if err := pool.QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port); err != nil {
		t.Fatal(err)
	}
	return port
}

// loop runs a function over and over in several goroutines until stopped.
type loop struct {
	stopOnce sync.Once
	stopped  chan struct{}
	wg       sync.WaitGroup
}

// startLoop runs f in n goroutines, again and again, until stop is called,
// at the end of the test at the latest.
func startLoop(t *testing.T, n int, f func()) *loop {
	l := &loop{stopped: make(chan struct{})}
	for range n {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stopped:
					return
				default:
					f()
				}
			}
		})
	}
	t.Cleanup(l.stop)
	return l
}

// stop stops the goroutines and waits for them.
func (l *loop) stop() {
	l.stopOnce.Do(func() { close(l.stopped) })
	l.wg.Wait()
}

// hostStat returns the Pool's figures for the host at addr; the test fails
// when the Pool has no such host.
func hostStat(t *testing.T, pool *failover.Pool, addr string) failover.HostStat {
	t.Helper()
	for _, h := range pool.Stat().Hosts() {
		if h.Addr == addr {
			return h
		}
	}
	t.Fatalf("no host %s in Stat", addr)
	return failover.HostStat{}
}

// writeLedger records what each write of an id returned, and checks the
// table of the writes against it.
type writeLedger = failovertest.Ledger[int64]

// writer inserts increasing ids through the pool from several goroutines
// until stopped, and keeps the outcome of every write.
type writer struct {
	*loop
	pool   *failover.Pool
	next   atomic.Int64
	ledger writeLedger // what every write returned, for checkAcked

	mu      sync.Mutex // guards the fields below
	acked   []int64
	ackedAt []time.Time // when each of acked returned
	errs    []error
	lastOK  time.Time
}

// startWriters creates the table writes and starts n writers on it. They
// stop at the end of the test at the latest.
func startWriters(t *testing.T, ctx context.Context, pool *failover.Pool, n int) *writer {
	t.Helper()
	if _, err := pool.Exec(ctx, "CREATE TABLE writes (id bigint)"); err != nil {
		t.Fatal(err)
	}
	w := &writer{pool: pool}
	w.loop = startLoop(t, n, func() { w.write(ctx) })
	return w
}

// errCount is how many writes have failed so far.
func (w *writer) errCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.errs)
}

// write inserts the next id and records the outcome.
func (w *writer) write(ctx context.Context) {
	id := w.next.Add(1)
	_, err := w.pool.Exec(ctx, "INSERT INTO writes (id) VALUES ($1)", id)
	w.ledger.Record(id, err)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.lastOK = time.Now()
		w.acked = append(w.acked, id)
		w.ackedAt = append(w.ackedAt, w.lastOK)
	} else {
		w.errs = append(w.errs, err)
	}
}

// firstAckAfter returns when the first write acknowledged after t
// returned, and false when none was.
func (w *writer) firstAckAfter(t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.ackedAt {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

func (w *writer) okCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

func TestWritesFollowPrimaryThroughFailover(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2), failovertest.SyncReplication())
	pool := newPool(t, ctx, c.ConnString("pool_max_conns=4"))
	w := startWriters(t, ctx, pool, 3)
	waitUntil(t, 30*time.Second, "writes before the failover", func() bool { return w.okCount() >= 50 })

	// The standby that received the most WAL is promoted: with
	// synchronous_standby_names = 'ANY 1 (*)' an acknowledged commit is
	// on one standby, not necessarily on a given one.
	promoted, err := c.Failover(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	before := w.okCount()
	waitUntil(t, 30*time.Second, "writes on the new primary", func() bool { return w.okCount() >= before+50 })
	// Each server's cluster_name is its node's name.
	var name string
	if err := pool.QueryRow(ctx, "SHOW cluster_name").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != promoted.Name() {
		t.Fatalf("pool writes to %s, want the new primary %s", name, promoted)
	}

	w.stop()

	// With synchronous replication, every acknowledged write survives the
	// promotion, exactly once.
	checkAcked(t, ctx, pool, w)
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("%d writes acknowledged, %d failed during the failover", len(w.acked), len(w.errs))
}

func TestSwitchoverLeavesNoStaleConnections(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	pool := newPool(t, ctx, c.ConnString("pool_max_conns=4"))
	w := startWriters(t, ctx, pool, 3)
	waitUntil(t, 30*time.Second, "writes before the switchover", func() bool { return w.okCount() >= 50 })

	old, next := c.Primary(), c.Nodes()[1]
	if _, err := c.Switchover(ctx, next); err != nil {
		t.Fatal(err)
	}
	// The new primary accepts writes and the old one is a standby now.
	errsAtSwitch := w.errCount()
	before := w.okCount()
	waitUntil(t, 30*time.Second, "writes after the switchover", func() bool { return w.okCount() >= before+100 })
	w.stop()

	w.mu.Lock()
	defer w.mu.Unlock()
	for _, err := range w.errs[errsAtSwitch:] {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "25006" {
			t.Errorf("write failed on a read-only server after the switchover: %v", err)
		}
	}
	if got := serverPort(t, ctx, pool); got != next.Port() {
		t.Fatalf("pool writes to port %d, want the new primary's %d (old primary %d)", got, next.Port(), old.Port())
	}
	t.Logf("%d writes acknowledged; %d failed during the switchover, %d after it", len(w.acked), errsAtSwitch, len(w.errs)-errsAtSwitch)
}

func TestNewWhenAllHostsAreDown(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	dsn := c.ConnString("connect_timeout=2")
	for _, n := range c.Nodes() {
		if err := n.Crash(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := failover.New(ctx, dsn)
	if err == nil {
		pool.Close()
		t.Fatal("New succeeded with every host down")
	}
	if !errors.Is(err, failover.ErrNoHost) {
		t.Errorf("error is not ErrNoHost: %v", err)
	}
	var fe *failover.FailoverError
	if !errors.As(err, &fe) || len(fe.Hosts) != len(c.Nodes()) {
		t.Fatalf("want one outcome per host, got %v", err)
	}
	for _, n := range c.Nodes() {
		if !strings.Contains(err.Error(), n.Addr()) {
			t.Errorf("error does not name host %s: %v", n.Addr(), err)
		}
	}
	if strings.Contains(err.Error(), c.Password()) {
		t.Errorf("error leaks the password: %v", err)
	}
}

func TestNewWithWrongPasswordNamesNoPassword(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	const wrong = "wrong-password-4242"
	dsn := strings.Replace(c.ConnString(""), c.Password(), wrong, 1)
	pool, err := failover.New(ctx, dsn)
	if err == nil {
		pool.Close()
		t.Fatal("New succeeded with a wrong password")
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
		t.Errorf("want the server's 28P01 inside, got %v", err)
	}
	if strings.Contains(err.Error(), wrong) {
		t.Errorf("error leaks the password: %v", err)
	}
}

func TestOurKeysNeverReachTheServer(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	// PostgreSQL refuses a connection that sets an unknown parameter, so
	// connecting at all proves none of these keys was sent.
	dsn := c.ConnString(strings.Join([]string{
		"target=primary", "zone=eu-1a", "zones=eu-1a,eu-1b",
		"failover_max_attempts=3", "failover_max_duration=5s",
		"failover_backoff_initial=10ms", "failover_backoff_max=200",
		"health_probe_interval=250ms", "pin_after_write=2s", "max_lag=5s",
		"replica_wait=5ms",
		"application_name=pgfailover-test",
	}, "&"))
	pool := newPool(t, ctx, dsn)
	var app string
	if err := pool.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&app); err != nil {
		t.Fatal(err)
	}
	if app != "pgfailover-test" {
		t.Errorf("application_name = %q: pgx keys must still reach the server", app)
	}
	rows, err := pool.Query(ctx, "SELECT name FROM pg_settings WHERE name IN ('target','zone','zones') OR name LIKE 'failover%'")
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 0 {
		t.Errorf("server saw our keys: %v", names)
	}
}

func TestWriteOnReadOnlyPrimaryEvictsItsConnections(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	reader, pool := newMeteredPool(t, ctx, c.ConnString("health_probe_interval=1h&failover_max_duration=2s"))
	if _, err := pool.Exec(ctx, "CREATE TABLE writes (id bigint)"); err != nil {
		t.Fatal(err)
	}
	// Fill the primary's pool with a few idle connections.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { pool.Exec(ctx, "SELECT pg_sleep(0.05)") })
	}
	wg.Wait()
	primary := c.Primary()
	fence(t, ctx, primary)

	_, err := pool.Exec(ctx, "INSERT INTO writes VALUES (1)")
	if !errors.Is(err, failover.ErrNoHost) {
		t.Fatalf("write to a read-only cluster: want ErrNoHost, got %v", err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Errorf("want the 25006 inside, got %v", err)
	}
	st := pool.Stat().Hosts()[0]
	if st.Pool.IdleConns() != 0 {
		t.Errorf("host %s keeps %d idle connections after refusing a write", st.Addr, st.Pool.IdleConns())
	}
	if n := sum(points(t, ctx, reader), "pgfailover.connection.closed", "host", primary.Addr(), "pgfailover.close.reason", "demoted"); n < 3 {
		t.Errorf("%v connections counted closed as demoted, want at least the 3 idle ones", n)
	}
	if err := primary.Exec(ctx, "ALTER SYSTEM RESET default_transaction_read_only"); err != nil {
		t.Fatal(err)
	}
	if err := primary.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "writes accepted again", func() bool {
		_, err := pool.Exec(ctx, "INSERT INTO writes VALUES (2)")
		return err == nil
	})
}

// fence makes the server at n read-only by its own configuration, as an
// operator fences a primary, and waits until new sessions see it.
func fence(t *testing.T, ctx context.Context, n *failovertest.Node) {
	t.Helper()
	if err := n.Exec(ctx, "ALTER SYSTEM SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	if err := n.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	// pg_reload_conf is asynchronous.
	waitUntil(t, 10*time.Second, "read-only default", func() bool {
		conn, err := pgx.Connect(ctx, n.ConnString(""))
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		var ro string
		return conn.QueryRow(ctx, "SHOW default_transaction_read_only").Scan(&ro) == nil && ro == "on"
	})
}

func TestAcquireIsPinned(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=1h"))
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if err := failoverTo(ctx, c, c.Nodes()[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a pinned connection to a stopped server worked")
	}
	// The pool itself moves on.
	waitUntil(t, 20*time.Second, "a write on the new primary", func() bool {
		_, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS t (id int)")
		return err == nil
	})
}

func ExampleNew() {
	ctx := context.Background()
	pool, err := failover.New(ctx, "postgres://app:secret@db-a:5432,db-b:5432,db-c:5432/app?zone=eu-1a")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	_, err = pool.Exec(ctx, "INSERT INTO events (kind) VALUES ($1)", "signup")
	if errors.Is(err, failover.ErrNoHost) {
		fmt.Println("no primary right now")
	}
}

func TestZoneFromServerSetting(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2), failovertest.Zones("eu-1a", "eu-1b", "eu-1c"))
	local := c.Nodes()[2]

	// Any role will do, so the host in the client's zone wins; each server
	// advertises its zone with the pgfailover.zone setting.
	pool := newPool(t, ctx, c.ConnString("target=any&zone=EU-1C"))
	if got := serverPort(t, ctx, pool); got != local.Port() {
		t.Fatalf("reads go to port %d, want %d in the client's zone", got, local.Port())
	}
	for _, h := range pool.Stat().Hosts() {
		want := hosthealth.TierOther
		if h.Addr == local.Addr() {
			want = hosthealth.TierSame
		}
		if h.Tier != want {
			t.Errorf("host %s (zone %q) is in tier %v, want %v", h.Addr, h.Zone, h.Tier, want)
		}
	}

	// The primary target follows the primary wherever it is.
	writes := newPool(t, ctx, c.ConnString("zone=eu-1c"))
	if got := serverPort(t, ctx, writes); got != c.Primary().Port() {
		t.Fatalf("writes go to port %d, want the primary's %d", got, c.Primary().Port())
	}
}

func TestTargets(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	primary, replica := c.Nodes()[0], c.Nodes()[1]
	for _, tc := range []struct {
		params string
		want   *failovertest.Node
	}{
		{"", primary},
		{"target_session_attrs=read-write", primary},
		{"target=primary", primary},
		{"target_session_attrs=read-only", replica},
		{"target=replica", replica},
		{"target_session_attrs=prefer-standby", replica},
		{"target=any", primary}, // both qualify: connection-string order decides
	} {
		pool := newPool(t, ctx, c.ConnString(tc.params))
		if got := serverPort(t, ctx, pool); got != tc.want.Port() {
			t.Errorf("%q: queries go to port %d, want %s", tc.params, got, tc.want)
		}
		pool.Close()
	}
}

func TestClosedPool(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	pool, err := failover.New(ctx, c.ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	pool.Close() // idempotent
	if _, err := pool.Exec(ctx, "SELECT 1"); !errors.Is(err, failover.ErrClosed) {
		t.Errorf("Exec on a closed pool: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT 1").Scan(&n); !errors.Is(err, failover.ErrClosed) {
		t.Errorf("QueryRow on a closed pool: %v", err)
	}
	if _, err := pool.Begin(ctx); !errors.Is(err, failover.ErrClosed) {
		t.Errorf("Begin on a closed pool: %v", err)
	}
}
