package failover_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/internal/stalecheck"
	"github.com/pgfailover/pgfailover/replica"
)

// readerPort returns the port of the server a read through the Reader
// went to.
func readerPort(ctx context.Context, pool *failover.Pool) (int, error) {
	var port int
	err := pool.Reader().QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port)
	return port, err
}

// ports returns the ports of nodes, as a set.
func ports(nodes ...*failovertest.Node) map[int]bool {
	s := map[int]bool{}
	for _, n := range nodes {
		s[n.Port()] = true
	}
	return s
}

func TestReaderSpreadsOverReplicas(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	ctx := testContext(t)
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=200ms"))
	replicas := ports(c.Replicas()...)
	waitUntil(t, 10*time.Second, "both replicas known", func() bool {
		n := 0
		for _, h := range pool.Stat().Hosts() {
			if h.Role.String() == "replica" {
				n++
			}
		}
		return n == 2
	})
	seen := map[int]int{}
	for range 40 {
		port, err := readerPort(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if !replicas[port] {
			t.Fatalf("a read went to port %d, not a replica (%v)", port, replicas)
		}
		seen[port]++
	}
	if len(seen) != 2 || seen[c.Replicas()[0].Port()] != 20 {
		t.Fatalf("reads per replica port: %v, want 20 on each", seen)
	}
}

// TestReaderCannotWrite: a statement that writes fails through the
// Reader, on a replica and on the primary alike.
func TestReaderCannotWrite(t *testing.T) {
	c := failovertest.Start(t)
	ctx := testContext(t)
	pool := newPool(t, ctx, c.ConnString("pin_after_write=1h"))
	if _, err := pool.Exec(ctx, "CREATE TABLE rw (v int)"); err != nil {
		t.Fatal(err)
	}
	// The write above pins reads to the primary for an hour.
	for _, sql := range []string{
		"INSERT INTO rw VALUES (1) RETURNING v",
		"WITH x AS (INSERT INTO rw VALUES (2) RETURNING v) SELECT v FROM x",
	} {
		var v int
		err := pool.Reader().QueryRow(ctx, sql).Scan(&v)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
			t.Errorf("%s through the Reader: %v, want SQLSTATE 25006", sql, err)
		}
	}
	tx, err := pool.Reader().BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO rw VALUES (3)"); err == nil {
		t.Error("an INSERT in the Reader's transaction succeeded")
	}
	_ = tx.Rollback(ctx)
	if _, err := pool.Reader().BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadWrite}); !errors.Is(err, failover.ErrReadWriteTx) {
		t.Errorf("BeginTx(ReadWrite) = %v, want ErrReadWriteTx", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM rw").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows written through the Reader: %d (%v), want 0", n, err)
	}
}

// TestReadYourWrites: with replay paused on every replica, a read through
// the Reader right after a write through the Pool sees the write.
func TestReadYourWrites(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	ctx := testContext(t)
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=200ms"))
	if _, err := pool.Exec(ctx, "CREATE TABLE ryw (v int)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Replicas() {
		if err := r.PauseReplay(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check := func(i int, how string) {
		var got int
		if err := pool.Reader().QueryRow(ctx, "SELECT coalesce(max(v), 0) FROM ryw").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != i {
			t.Fatalf("after %s %d the Reader read %d", how, i, got)
		}
	}
	for i := 1; i <= 30; i++ {
		switch i % 3 {
		case 0:
			if _, err := pool.Exec(ctx, "INSERT INTO ryw VALUES ($1)", i); err != nil {
				t.Fatal(err)
			}
			check(i, "Exec")
		case 1:
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "INSERT INTO ryw VALUES ($1)", i)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			check(i, "a transaction writing")
		case 2:
			var v int
			if err := pool.QueryRow(ctx, "INSERT INTO ryw VALUES ($1) RETURNING v", i).Scan(&v); err != nil {
				t.Fatal(err)
			}
			check(i, "INSERT … RETURNING")
		}
	}
}

// TestLaggingReplicaIsExcluded: with replay paused everywhere and a write
// made outside the Pool, no read begun more than max_lag after the write
// returned reads the old value (the staleness bound of docs/reads.md);
// reads return to the replicas once they catch up.
func TestLaggingReplicaIsExcluded(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	ctx := testContext(t)
	const maxLag = time.Second
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=200ms&max_lag=1s&failover_max_duration=2s"))
	primary := c.Primary()
	if err := primary.Exec(ctx, "CREATE TABLE lag (v int); INSERT INTO lag VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	replicas := ports(c.Replicas()...)
	waitUntil(t, 10*time.Second, "reads on the replicas", func() bool {
		port, err := readerPort(ctx, pool)
		return err == nil && replicas[port]
	})
	for _, r := range c.Replicas() {
		if err := r.PauseReplay(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// How sharp the check below is: a replica whose bound already nears
	// max_lag leaves the gate before wrote+max_lag, and only a gate broken
	// by more than that margin would show.
	for _, r := range c.Replicas() {
		h := hostStat(t, pool, r.Addr())
		t.Logf("replica %s just before the write: staleness bound %v (known %v)", r.Addr(), h.Staleness, h.StalenessKnown)
	}
	if err := primary.Exec(ctx, "UPDATE lag SET v = 2"); err != nil {
		t.Fatal(err)
	}
	// A read begun after wrote+max_lag is routed later still, when a
	// replica that has not replayed the write is stale past max_lag by the
	// Pool's own bound (the time of the newest sample of the primary it has
	// reached), however late the probes run: the bound grows by itself
	// between them. So the threshold is max_lag itself (see
	// stalecheck.AfterWrite).
	stalecheck.AfterWrite(t, time.Now(), maxLag, 1, func() (v int, err error) {
		err = pool.Reader().QueryRow(ctx, "SELECT v FROM lag").Scan(&v)
		return v, err
	})
	if port, _ := readerPort(ctx, pool); port != primary.Port() {
		t.Fatalf("reads go to port %d while every replica lags, want the primary %d", port, primary.Port())
	}

	// The primary stops as well: reads fail, saying why each host was
	// passed over.
	if err := primary.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := readerPort(ctx, pool)
	var lagErr *failover.ReplicaLagError
	if !errors.As(err, &lagErr) || !errors.Is(err, failover.ErrBudgetExhausted) && !errors.Is(err, failover.ErrNoHost) {
		t.Fatalf("read with every replica stale and the primary down: %v, want a FailoverError naming a ReplicaLagError", err)
	}
	t.Logf("read with every replica stale and the primary down: %v", err)
	if err := primary.Start(ctx); err != nil {
		t.Fatal(err)
	}

	for _, r := range c.Replicas() {
		if err := r.ResumeReplay(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 15*time.Second, "reads back on the replicas", func() bool {
		port, err := readerPort(ctx, pool)
		return err == nil && replicas[port]
	})
}

// TestIdlePrimaryAndStoppedReceiver: replicas of an idle primary stay
// eligible; a replica whose WAL receiver stopped while the primary writes
// falls out.
func TestIdlePrimaryAndStoppedReceiver(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	ctx := testContext(t)
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=200ms&max_lag=1s"))
	r0, r1 := c.Replicas()[0], c.Replicas()[1]
	eligible := func(n *failovertest.Node) bool {
		h := hostStat(t, pool, n.Addr())
		return h.StalenessKnown && h.Staleness <= time.Second
	}
	waitUntil(t, 10*time.Second, "both replicas eligible", func() bool { return eligible(r0) && eligible(r1) })
	// Idle for ten probe intervals: still eligible at every look.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		if !eligible(r0) || !eligible(r1) {
			t.Fatalf("a replica of an idle primary fell out: %+v / %+v", hostStat(t, pool, r0.Addr()), hostStat(t, pool, r1.Addr()))
		}
		port, err := readerPort(ctx, pool)
		if err != nil || !ports(r0, r1)[port] {
			t.Fatalf("a read of an idle cluster went to %d (%v)", port, err)
		}
	}

	// r0's receiver points at a closed port; the primary keeps writing.
	for _, sql := range []string{"ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port=1'", "SELECT pg_reload_conf()"} {
		if err := r0.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Primary().Exec(ctx, "CREATE TABLE busy (v int)"); err != nil {
		t.Fatal(err)
	}
	writer := startLoop(t, 1, func() { _ = c.Primary().Exec(ctx, "INSERT INTO busy VALUES (1)") })
	waitUntil(t, 10*time.Second, "r0 out of the gate", func() bool { return !eligible(r0) })
	var onR0 atomic.Int32
	for range 20 {
		port, err := readerPort(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if port == r0.Port() {
			onR0.Add(1)
		}
	}
	writer.stop()
	if n := onR0.Load(); n > 0 {
		t.Fatalf("%d reads went to the replica whose receiver is down", n)
	}
	if !eligible(r1) {
		t.Fatalf("the streaming replica fell out too: %+v", hostStat(t, pool, r1.Addr()))
	}
}

// TestReaderSurvivesAReplicaKill: reads under load lose nothing when a
// replica is killed.
func TestReaderSurvivesAReplicaKill(t *testing.T) {
	c := failovertest.Start(t, failovertest.Replicas(2))
	ctx := testContext(t)
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=200ms"))
	var reads, failed atomic.Int64
	var firstErr atomic.Value
	readers := startLoop(t, 8, func() {
		var one int
		err := pool.Reader().QueryRow(ctx, "SELECT 1").Scan(&one)
		reads.Add(1)
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
		}
	})
	waitUntil(t, 10*time.Second, "reads flowing", func() bool { return reads.Load() > 200 })
	victim := c.Replicas()[0]
	if err := victim.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	before := reads.Load()
	waitUntil(t, 10*time.Second, "reads after the kill", func() bool { return reads.Load() > before+500 })
	readers.stop()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d reads failed; first: %v", n, reads.Load(), firstErr.Load())
	}
	t.Logf("%d reads, 0 failed", reads.Load())
}

// TestReaderAfterPromotion: a promoted replica is read from as a replica
// no more, and the Pool writes to it.
func TestReaderAfterPromotion(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	ctx := testContext(t)
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=200ms&pin_after_write=0"))
	if _, err := pool.Exec(ctx, "CREATE TABLE promo (v int)"); err != nil {
		t.Fatal(err)
	}
	// Replication is asynchronous: the table must be on the replica
	// before it is promoted.
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	next := c.Replicas()[0]
	if err := failoverTo(ctx, c, next); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO promo VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if port := serverPort(t, ctx, pool); port != next.Port() {
		t.Fatalf("the Pool writes to %d, want the new primary %d", port, next.Port())
	}
	other := c.Replicas()[0]
	waitUntil(t, 10*time.Second, "the new primary known", func() bool {
		return hostStat(t, pool, next.Addr()).Role.String() == "primary"
	})
	for range 20 {
		port, err := readerPort(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if port == next.Port() && other.Running() {
			t.Fatalf("a read went to the promoted server %d as a replica", port)
		}
	}
}

// TestCausalReads: a read carrying a write's token never misses the write,
// and it is served by the replica that has replayed it.
func TestCausalReads(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	ctx := testContext(t)
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=200ms&pin_after_write=1h"))
	if _, err := pool.Exec(ctx, "CREATE TABLE causal (v int)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	paused, live := c.Replicas()[0], c.Replicas()[1]
	if err := paused.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	onLive, onPrimary := 0, 0
	for i := 1; i <= 30; i++ {
		tok := new(failover.CausalToken)
		wctx := failover.WithCausalToken(ctx, tok)
		if _, err := pool.Exec(wctx, "INSERT INTO causal VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
		// The token travels as text, as it would between requests.
		back, err := failover.ParseCausalToken(tok.String())
		if err != nil || tok.String() == "" {
			t.Fatalf("token %q: %v", tok.String(), err)
		}
		rctx := failover.WithCausalToken(ctx, back)
		if i%2 == 0 {
			// As a later request would: the live replica has replayed it.
			waitUntil(t, 10*time.Second, "the live replica to replay the write", func() bool {
				var caught bool
				conn, err := live.Connect(ctx)
				if err != nil {
					return false
				}
				defer conn.Close(ctx)
				err = conn.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", tok.String()).Scan(&caught)
				return err == nil && caught
			})
		}
		var got, port int
		if err := pool.Reader().QueryRow(rctx, "SELECT coalesce(max(v), 0), current_setting('port')::int FROM causal").Scan(&got, &port); err != nil {
			t.Fatal(err)
		}
		if got != i {
			t.Fatalf("read with the token of write %d saw %d (port %d)", i, got, port)
		}
		switch port {
		case live.Port():
			onLive++
		case c.Primary().Port():
			onPrimary++
		default:
			t.Fatalf("a causal read went to the paused replica %d", port)
		}
	}
	t.Logf("causal reads: %d on the live replica, %d on the primary", onLive, onPrimary)
	if onLive < 15 {
		t.Fatalf("%d causal reads were served by the live replica, want at least the 15 made after it had replayed the write", onLive)
	}
}

// TestReaderWithoutReplicas: with no replica, the Reader reads from the
// primary.
func TestReaderWithoutReplicas(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	ctx := testContext(t)
	pool := newPool(t, ctx, c.ConnString(""))
	port, err := readerPort(ctx, pool)
	if err != nil || port != c.Primary().Port() {
		t.Fatalf("read without replicas: port %d, %v; want the primary %d", port, err, c.Primary().Port())
	}
}

// TestReplicaConfigChecked: NewWithConfig refuses replica settings out of
// range, naming the key, before it dials anything.
func TestReplicaConfigChecked(t *testing.T) {
	for _, tc := range []struct {
		key string
		set func(*failover.ReplicaConfig)
	}{
		{"max_lag", func(r *failover.ReplicaConfig) { r.MaxLag = 500 * time.Millisecond }},
		{"max_lag", func(r *failover.ReplicaConfig) { r.MaxLag = -time.Second }},
		{"pin_after_write", func(r *failover.ReplicaConfig) { r.PinAfterWrite = -time.Second }},
		{"replica_wait", func(r *failover.ReplicaConfig) { r.Wait = -time.Millisecond }},
		{"outage_reads", func(r *failover.ReplicaConfig) { r.OutageReads = replica.OutageWait + 1 }},
	} {
		cfg, err := failover.ParseConfig("postgres://u:secret@127.0.0.1:1/db")
		if err != nil {
			t.Fatal(err)
		}
		tc.set(&cfg.Replica)
		_, err = failover.NewWithConfig(context.Background(), cfg)
		var ce *failover.ConfigError
		if !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("NewWithConfig with %+v: %v, want a ConfigError naming %s", cfg.Replica, err, tc.key)
		}
	}
}
