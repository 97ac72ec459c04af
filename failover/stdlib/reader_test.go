package stdlib_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/failover/stdlib"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/stalecheck"
)

// TestOpenReaderDB: the reader DB reads from the replicas, cannot write,
// and leaves a replica that falls behind max_lag for the primary.
func TestOpenReaderDB(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	ctx := testContext(t)
	pool, err := failover.New(ctx, c.ConnString("health_probe_interval=200ms&max_lag=1s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenReaderDB(pool)
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(4)

	if err := c.Primary().Exec(ctx, "CREATE TABLE r (v int); INSERT INTO r VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	replicas := map[int]bool{}
	for _, r := range c.Replicas() {
		replicas[r.Port()] = true
	}
	port := func() int {
		var p int
		if err := db.QueryRowContext(ctx, "SELECT current_setting('port')::int").Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	waitUntil(t, 10*time.Second, "reads on the replicas", func() bool { return replicas[port()] })
	seen := map[int]bool{}
	for range 40 {
		p := port()
		if !replicas[p] {
			t.Fatalf("a read went to port %d, not a replica", p)
		}
		seen[p] = true
	}
	t.Logf("sequential reads used %d replica(s): routing is per connection", len(seen))

	_, err = db.ExecContext(ctx, "INSERT INTO r VALUES (2)")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Fatalf("an INSERT through the reader DB: %v, want SQLSTATE 25006", err)
	}

	// Every replica stops replaying; a write on the primary must be seen
	// by every read that begins more than max_lag after the write returned.
	// The DB keeps no idle connection, so each read takes a connection of
	// the Reader's PgxPool, which hands one out only while its host would
	// take a read then (a replica within max_lag by the Pool's bound, which
	// grows by itself between probes). The connection is taken after
	// the read began, so the threshold is max_lag itself (see
	// stalecheck.AfterWrite).
	for _, r := range c.Replicas() {
		if err := r.PauseReplay(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// How sharp the check below is: a replica whose bound already nears
	// max_lag leaves the gate before wrote+max_lag, and only a gate broken
	// by more than that margin would show.
	for _, h := range pool.Stat().Hosts() {
		if h.Role == hosthealth.RoleReplica {
			t.Logf("replica %s just before the write: staleness bound %v (known %v)", h.Addr, h.Staleness, h.StalenessKnown)
		}
	}
	if err := c.Primary().Exec(ctx, "UPDATE r SET v = 2"); err != nil {
		t.Fatal(err)
	}
	stalecheck.AfterWrite(t, time.Now(), time.Second, 1, func() (v int, err error) {
		err = db.QueryRowContext(ctx, "SELECT v FROM r").Scan(&v)
		return v, err
	})
	for _, r := range c.Replicas() {
		if err := r.ResumeReplay(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 15*time.Second, "reads back on the replicas", func() bool { return replicas[port()] })
}
