package stdlib_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/failover/stdlib"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

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

// writers insert increasing ids through db from several goroutines until
// stopped, never sending an id twice, and keep every outcome.
type writers struct {
	db   *sql.DB
	next atomic.Int64
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	ledger failovertest.Ledger[int64] // what every write returned

	mu    sync.Mutex // guards the fields below
	acked []int64
	errs  []error
}

func startWriters(t *testing.T, ctx context.Context, db *sql.DB, n int) *writers {
	t.Helper()
	if _, err := db.ExecContext(ctx, "CREATE TABLE writes (id bigint)"); err != nil {
		t.Fatal(err)
	}
	w := &writers{db: db, stop: make(chan struct{})}
	for range n {
		w.wg.Go(func() {
			for {
				select {
				case <-w.stop:
					return
				default:
				}
				id := w.next.Add(1)
				_, err := db.ExecContext(ctx, "INSERT INTO writes (id) VALUES ($1)", id)
				w.ledger.Record(id, err)
				w.mu.Lock()
				if err == nil {
					w.acked = append(w.acked, id)
				} else {
					w.errs = append(w.errs, err)
				}
				w.mu.Unlock()
			}
		})
	}
	t.Cleanup(w.halt)
	return w
}

// halt stops the writers and waits for them. It may be called again.
func (w *writers) halt() {
	w.once.Do(func() { close(w.stop) })
	w.wg.Wait()
}

func (w *writers) okCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

func TestOpenDBThroughKillAndPromote(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2), failovertest.SyncReplication())
	db := openDB(t, ctx, c.ConnString("pool_max_conns=4"))

	w := startWriters(t, ctx, db, 3)
	waitUntil(t, 30*time.Second, "writes before the failover", func() bool { return w.okCount() >= 50 })
	// The standby that received the most WAL is promoted: under
	// 'ANY 1 (*)' an acknowledged commit is on one standby, not
	// necessarily on a given one.
	promoted, err := c.Failover(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	before := w.okCount()
	waitUntil(t, 30*time.Second, "writes on the new primary", func() bool { return w.okCount() >= before+50 })
	w.halt()

	// Each server's cluster_name is its node's name.
	var name string
	if err := db.QueryRowContext(ctx, "SHOW cluster_name").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != promoted.Name() {
		t.Fatalf("database/sql writes to %s, want the new primary %s", name, promoted)
	}

	// Synchronous replication keeps every acknowledged write. The table has
	// no key, so a write database/sql ran twice would show up twice.
	if _, err := w.ledger.Check(ctx, promoted, "writes", "id"); err != nil {
		t.Error(err)
	}
	// A write cut in flight says its outcome is unknown; no other failure
	// is expected: new connections wait for the new primary.
	unknown := 0
	for _, err := range w.errs {
		if errors.Is(err, failover.ErrCommitOutcomeUnknown) {
			unknown++
			continue
		}
		t.Errorf("a write failed with something else than ErrCommitOutcomeUnknown: %v", err)
	}
	t.Logf("%d writes acknowledged, %d cut in flight (ErrCommitOutcomeUnknown)", len(w.acked), unknown)
}

func TestOpenDBAfterSwitchoverNoReadOnlyErrors(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	db := openDB(t, ctx, c.ConnString("pool_max_conns=4"))

	w := startWriters(t, ctx, db, 3)
	waitUntil(t, 30*time.Second, "writes before the switchover", func() bool { return w.okCount() >= 50 })
	next := c.Nodes()[1]
	if _, err := c.Switchover(ctx, next); err != nil {
		t.Fatal(err)
	}
	// The new primary accepts writes from here on.
	w.mu.Lock()
	errsAtSwitch := len(w.errs)
	w.mu.Unlock()
	before := w.okCount()
	waitUntil(t, 30*time.Second, "writes after the switchover", func() bool { return w.okCount() >= before+100 })
	w.halt()
	for _, err := range w.errs[errsAtSwitch:] {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "25006" {
			t.Errorf("write failed on a read-only server after the switchover: %v", err)
		}
	}
	t.Logf("%d writes acknowledged; %d failed during the switchover, %d after it", len(w.acked), errsAtSwitch, len(w.errs)-errsAtSwitch)
}

func TestSQLOpenKeepsOurKeysFromTheServer(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t)
	primary, replica := c.Primary(), c.Replicas()[0]
	// The replica first, and every kind of key of ours: a server sent any
	// of them would refuse the connection (unrecognized configuration
	// parameter).
	dsn := c.ConnStringFor([]*failovertest.Node{replica, primary},
		"target=read-write&zone=z1&zones=z1,z2&failover_max_attempts=3&failover_max_duration=5s&"+
			"failover_backoff_initial=10ms&failover_backoff_max=100ms&health_probe_interval=500ms&pin_after_write=0&application_name=pgfailover-test")
	db, err := sql.Open(stdlib.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}()

	var port int
	var inRecovery bool
	if err := db.QueryRowContext(ctx, "SELECT current_setting('port')::int, pg_is_in_recovery()").Scan(&port, &inRecovery); err != nil {
		t.Fatal(err)
	}
	if port != primary.Port() || inRecovery {
		t.Fatalf("connected to port %d (in recovery %v), want the primary's %d", port, inRecovery, primary.Port())
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatal(err)
	}

	// The session's settings hold none of our keys, and the server saw the
	// application_name we passed through.
	ours := []string{"target", "target_session_attrs", "zone", "zones", "failover_max_attempts", "failover_max_duration",
		"failover_backoff_initial", "failover_backoff_max", "health_probe_interval", "pin_after_write"}
	for _, k := range ours {
		var v sql.NullString
		if err := db.QueryRowContext(ctx, "SELECT current_setting($1, true)", k).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v.Valid {
			t.Errorf("the server knows %s = %q", k, v.String)
		}
	}
	var app string
	if err := db.QueryRowContext(ctx, "SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&app); err != nil {
		t.Fatal(err)
	}
	if app != "pgfailover-test" {
		t.Errorf("application_name = %q, want pgfailover-test", app)
	}
}

func TestSQLOpenHidesThePassword(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	const secret = "Sup3r-secret-pw"

	// A bad value of one of our keys fails sql.Open itself.
	_, err := sql.Open(stdlib.DriverName, "postgres://postgres:"+secret+"@127.0.0.1:5432/postgres?failover_max_attempts=zero")
	if err == nil {
		t.Fatal("sql.Open accepted failover_max_attempts=zero")
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("sql.Open's error shows the password: %v", err)
	}
	if _, err := sql.Open(stdlib.DriverName, "host=127.0.0.1 password="+secret+" health_probe_interval=-1s"); err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("keyword/value string: error %v", err)
	}

	// A wrong password fails the first connection, whose error names the
	// host and not the password.
	n := c.Primary()
	dsn := strings.Replace(n.ConnString("connect_timeout=2"), ":"+c.Password()+"@", ":"+secret+"@", 1)
	db, err := sql.Open(stdlib.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.PingContext(ctx)
	if err == nil {
		t.Fatal("Ping with a wrong password succeeded")
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("the connect error shows the password: %v", err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
		t.Errorf("the connect error is not the authentication failure: %v", err)
	}
}

func TestDriverOpenRefused(t *testing.T) {
	if _, err := (stdlib.Driver{}).Open("postgres://x"); err == nil {
		t.Fatal("Driver.Open succeeded")
	}
}
