package failover_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// patroniCallTimeout is the deadline of every call the load makes, as a
// service would set one per request. It is longer than a lost node leaves
// the cluster without a leader (about the ttl, 10 s), so that every call
// not in flight at the fault can wait for the new leader; the Pool's own
// budget, failover_max_duration, is 30 s by default. With a 10 s deadline,
// calls made just after a lost node's fault end with their deadline before
// any leader exists (ErrBudgetExhausted wrapping context.DeadlineExceeded).
const patroniCallTimeout = 20 * time.Second

// TestPatroni runs a Pool with default settings against a real Patroni
// cluster (3 members, synchronous mode, ttl 10 s, loop_wait 1 s,
// retry_timeout 3 s, primary_start_timeout 0) through a switchover, a
// killed leader postmaster and a lost leader node, under writers and
// readers whose calls each have a 20 s deadline. In each scenario no call
// gives up with ErrBudgetExhausted, no read fails, a write fails only when
// it was in flight at the fault (at most one per writer) and then only with
// ErrCommitOutcomeUnknown, and every acknowledged write is on the new
// leader exactly once: synchronous mode keeps acknowledged commits.
//
// One cluster serves the scenarios in turn; each starts from a healthy
// cluster with a new Pool.
func TestPatroni(t *testing.T) {
	skipUnderShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	pc := pgtest.StartPatroni(t, pgtest.PatroniOptions{})
	t.Logf("Patroni cluster healthy in %v", time.Since(start).Round(time.Millisecond))

	switchover := func(ctx context.Context) (*pgtest.PatroniMember, error) {
		from, _, err := pc.Switchover(ctx)
		return from, err
	}
	// The connection string names every member; or only the leader, with
	// the others found through the REST API; or none at all.
	every := func(*pgtest.PatroniMember) string { return pc.ConnString("") }
	api := "patroni_api_urls=" + strings.Join(pc.APIURLs(), ",")
	leaderOnly := func(l *pgtest.PatroniMember) string { return l.ConnString(api) }
	noHost := func(*pgtest.PatroniMember) string {
		return "postgres://postgres:" + pc.Password() + "@/postgres?sslmode=disable&" + api
	}
	t.Run("Switchover", func(t *testing.T) {
		runPatroniScenario(t, ctx, pc, every, switchover, false)
	})
	t.Run("KillLeaderPostmaster", func(t *testing.T) {
		runPatroniScenario(t, ctx, pc, every, pc.KillLeaderPostmaster, false)
	})
	t.Run("KillLeaderNode", func(t *testing.T) {
		runPatroniScenario(t, ctx, pc, every, pc.KillLeaderNode, true)
	})
	// Through the REST API: the writes follow the leader to a member the
	// connection string never named.
	t.Run("DiscoveredSwitchover", func(t *testing.T) {
		runPatroniScenario(t, ctx, pc, leaderOnly, switchover, false)
	})
	t.Run("DiscoveredKillLeaderPostmaster", func(t *testing.T) {
		runPatroniScenario(t, ctx, pc, leaderOnly, pc.KillLeaderPostmaster, false)
	})
	t.Run("NoHostSwitchover", func(t *testing.T) {
		runPatroniScenario(t, ctx, pc, noHost, switchover, false)
	})
	t.Run("APIUnreachable", func(t *testing.T) { patroniAPIUnreachable(t, ctx, pc) })
	t.Run("Herd", func(t *testing.T) { patroniHerd(t, ctx, pc) })
	t.Run("Membership", func(t *testing.T) { patroniMembership(t, ctx, pc) })
	t.Run("LocalFirst", func(t *testing.T) { patroniLocalFirst(t, ctx, pc) })
}

// runPatroniScenario runs load through a new Pool, applies fault (which
// returns the leader it hit), waits for the new leader and for the load to
// carry on there, then checks and logs what the load saw. restart brings
// the old leader's Patroni back at the end of the test.
func runPatroniScenario(t *testing.T, ctx context.Context, pc *pgtest.PatroniCluster,
	dsn func(leader *pgtest.PatroniMember) string, fault func(context.Context) (*pgtest.PatroniMember, error), restart bool) {
	if err := pc.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	leader, err := pc.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Default settings; the logger only records when the Pool saw each
	// host change.
	cfg, err := failover.ParseConfig(dsn(leader))
	if err != nil {
		t.Fatal(err)
	}
	hostLog := &recordingHandler{}
	cfg.Logger = slog.New(hostLog)
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	table := "writes_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))
	// Each row records the server it was written on and when the INSERT
	// ran there.
	if _, err := pool.Exec(ctx, "CREATE TABLE "+table+
		" (id bigint NOT NULL, port int NOT NULL DEFAULT current_setting('port')::int,"+
		" at timestamptz NOT NULL DEFAULT clock_timestamp())"); err != nil {
		t.Fatal(err)
	}
	const writers, readers = 4, 2
	load := startPatroniLoad(t, ctx, pool, table, writers, readers)
	waitUntil(t, 30*time.Second, "writes and reads before the fault", func() bool {
		return load.acksSince(time.Time{}) >= 50 && load.readsSince(time.Time{}) >= 50
	})

	var others []*pgtest.PatroniMember
	for _, m := range pc.Members() {
		if m != leader {
			others = append(others, m)
		}
	}
	watch := watchWritable(ctx, others)
	defer watch.stop()

	connsBefore := pool.Stat().NewConnsCount()
	faultAt := time.Now()
	old, err := fault(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if old != leader {
		t.Fatalf("the fault hit %s, the leader was %s", old, leader)
	}
	if restart {
		t.Cleanup(func() {
			rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := pc.RestartMember(rctx, old); err != nil {
				t.Error(err)
			}
		})
	}
	nl, err := pc.WaitNewLeader(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	leaderAt := time.Now()
	var writableAt time.Time
	waitUntil(t, 10*time.Second, "the new leader seen writable by the 1 ms poll", func() bool {
		var m *pgtest.PatroniMember
		m, writableAt = watch.result()
		if m != nil && m != nl {
			t.Fatalf("%s left recovery first, but the new leader is %s", m, nl)
		}
		return m != nil
	})
	watch.stop()
	waitUntil(t, 60*time.Second, "writes and reads on the new leader", func() bool {
		return load.acksSince(writableAt) >= 50 && load.readsSince(writableAt) >= 50
	})
	load.stop()

	// What is on the new leader, read there directly.
	conn, err := pgx.Connect(ctx, nl.ConnString("connect_timeout=5"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var inRecovery bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil || inRecovery {
		t.Fatalf("new leader %s: in recovery %v, %v", nl, inRecovery, err)
	}
	// Every acknowledged write is there once, no write is there twice, and
	// none that failed otherwise than with ErrCommitOutcomeUnknown is there.
	verdict, err := load.ledger.Check(ctx, conn, table, "id")
	if err != nil {
		t.Errorf("the new leader %s: %v", nl, err)
	}
	rows, err := conn.Query(ctx, "SELECT id, port, at FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	port := map[int64]int{}
	var id int64
	var p int
	var at, firstRan time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &p, &at}, func() error {
		port[id] = p
		if p == nl.Port() && (firstRan.IsZero() || at.Before(firstRan)) {
			firstRan = at
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	load.mu.Lock()
	defer load.mu.Unlock()
	var firstOnNew time.Time
	for id, at := range load.acked {
		if port[id] == nl.Port() && (firstOnNew.IsZero() || at.Before(firstOnNew)) {
			firstOnNew = at
		}
	}

	// Failures.
	var all []timedErr
	for i, errs := range load.writeErrs {
		n := 0
		for _, e := range errs {
			all = append(all, e)
			n++
			if !errors.Is(e.err, failover.ErrCommitOutcomeUnknown) {
				t.Errorf("writer %d: a write failed at fault%s with %v; only writes in flight at the fault may fail, with ErrCommitOutcomeUnknown",
					i, offset(e.at, faultAt), e.err)
			}
		}
		if n > 1 {
			t.Errorf("writer %d: %d writes failed; at most the one in flight at the fault may", i, n)
		}
	}
	for _, e := range load.readErrs {
		all = append(all, e)
		t.Errorf("a read failed at fault%s: %v", offset(e.at, faultAt), e.err)
	}
	for _, e := range all {
		if errors.Is(e.err, failover.ErrBudgetExhausted) {
			t.Errorf("a call gave up with ErrBudgetExhausted at fault%s: %v", offset(e.at, faultAt), e.err)
		}
	}

	// Figures.
	acks := slices.SortedFunc(maps.Values(load.acked), time.Time.Compare)
	var stall time.Duration
	var stallFrom time.Time
	for i := 1; i < len(acks); i++ {
		if d := acks[i].Sub(acks[i-1]); d > stall {
			stall, stallFrom = d, acks[i-1]
		}
	}
	firstAck := "none"
	if !firstOnNew.IsZero() {
		// Reported, not asserted: how soon depends on the machine's load.
		firstAck = firstOnNew.Sub(writableAt).Round(100 * time.Microsecond).String()
	} else {
		t.Errorf("no acknowledged write landed on the new leader %s", nl)
	}
	t.Logf("%s -> %s: writable (1 ms pg_is_in_recovery() poll) at fault%s; WaitNewLeader returned at fault%s",
		old.Name(), nl.Name(), offset(writableAt, faultAt), offset(leaderAt, faultAt))
	t.Logf("first acknowledged write on %s: writable+%s (the first INSERT there ran at writable%s)",
		nl.Name(), firstAck, offset(firstRan, writableAt))
	t.Logf("longest write stall: %v, from fault%s", stall.Round(time.Millisecond), offset(stallFrom, faultAt))
	t.Logf("writes: %d acknowledged, failed %s; on the new leader: %v", len(load.acked), kindCounts(slices.Concat(load.writeErrs...)), verdict)
	t.Logf("reads: %d succeeded, failed %s", len(load.reads), kindCounts(load.readErrs))
	for _, e := range all {
		t.Logf("  call from fault%s failed at fault%s: %v",
			offset(e.start, faultAt), offset(e.at, faultAt), e.err)
	}
	for _, r := range hostLog.since(faultAt) {
		t.Logf("  pool log at fault%s: %s", offset(r.Time, faultAt), r.text)
	}
	t.Logf("connection attempts (pgxpool NewConnsCount): %d before the fault, %d in all", connsBefore, pool.Stat().NewConnsCount())
	for _, h := range pool.Stat().Hosts() {
		t.Logf("  host %s: %v, %d probes, %d connection attempts", h.Addr, h.State, h.Probes, h.Pool.NewConnsCount())
	}
}

// offset returns how long after ref t is, signed and in milliseconds:
// "+1.5s", "-120ms".
func offset(t, ref time.Time) string {
	d := t.Sub(ref).Round(time.Millisecond)
	if d < 0 {
		return d.String()
	}
	return "+" + d.String()
}

// timedErr is a failed call: when it started, when it returned, and its
// error.
type timedErr struct {
	start, at time.Time
	err       error
}

// recordingHandler is a slog.Handler that keeps every record's time and
// text.
type recordingHandler struct {
	mu   sync.Mutex
	recs []logRecord
}

type logRecord struct {
	time.Time
	text string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler            { return h }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, logRecord{time.Now(), b.String()})
	h.mu.Unlock()
	return nil
}

// since returns the records logged after t.
func (h *recordingHandler) since(t time.Time) []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logRecord
	for _, r := range h.recs {
		if r.After(t) {
			out = append(out, r)
		}
	}
	return out
}

// errKind names what a failed call's error wraps.
func errKind(err error) string {
	var k string
	switch {
	case errors.Is(err, failover.ErrCommitOutcomeUnknown):
		k = "ErrCommitOutcomeUnknown"
	case errors.Is(err, failover.ErrBudgetExhausted):
		k = "ErrBudgetExhausted"
	case errors.Is(err, failover.ErrNoHost):
		k = "ErrNoHost"
	case errors.Is(err, failover.ErrTxInterrupted):
		k = "ErrTxInterrupted"
	case errors.Is(err, failover.ErrClosed):
		k = "ErrClosed"
	default:
		k = fmt.Sprintf("other (%T)", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		k += "+deadline"
	}
	return k
}

// kindCounts summarises errs by kind: "0", or "2 (ErrCommitOutcomeUnknown: 2)".
func kindCounts(errs []timedErr) string {
	if len(errs) == 0 {
		return "0"
	}
	n := map[string]int{}
	for _, e := range errs {
		n[errKind(e.err)]++
	}
	parts := make([]string, 0, len(n))
	for k, c := range n {
		parts = append(parts, fmt.Sprintf("%s: %d", k, c))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d (%s)", len(errs), strings.Join(parts, ", "))
}

// patroniLoad runs writers, each inserting increasing ids into table, and
// readers counting its rows, every call with its own patroniCallTimeout.
type patroniLoad struct {
	next     atomic.Int64
	stopped  chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	ledger   writeLedger // what every write returned

	mu        sync.Mutex // guards the fields below
	acked     map[int64]time.Time
	writeErrs [][]timedErr // by writer
	reads     []time.Time
	readErrs  []timedErr
}

func startPatroniLoad(t *testing.T, ctx context.Context, pool *failover.Pool, table string, writers, readers int) *patroniLoad {
	l := &patroniLoad{
		stopped:   make(chan struct{}),
		acked:     map[int64]time.Time{},
		writeErrs: make([][]timedErr, writers),
	}
	insert := "INSERT INTO " + table + " (id) VALUES ($1)"
	for i := range writers {
		l.wg.Go(func() {
			for !l.isStopped() {
				id := l.next.Add(1)
				start := time.Now()
				cctx, cancel := context.WithTimeout(ctx, patroniCallTimeout)
				_, err := pool.Exec(cctx, insert, id)
				cancel()
				now := time.Now()
				l.ledger.Record(id, err)
				l.mu.Lock()
				if err == nil {
					l.acked[id] = now
				} else {
					l.writeErrs[i] = append(l.writeErrs[i], timedErr{start, now, err})
				}
				l.mu.Unlock()
			}
		})
	}
	query := "SELECT count(*) FROM " + table
	for range readers {
		l.wg.Go(func() {
			for !l.isStopped() {
				var n int64
				start := time.Now()
				cctx, cancel := context.WithTimeout(ctx, patroniCallTimeout)
				err := pool.QueryRow(cctx, query).Scan(&n)
				cancel()
				now := time.Now()
				l.mu.Lock()
				if err == nil {
					l.reads = append(l.reads, now)
				} else {
					l.readErrs = append(l.readErrs, timedErr{start, now, err})
				}
				l.mu.Unlock()
			}
		})
	}
	t.Cleanup(l.stop)
	return l
}

func (l *patroniLoad) isStopped() bool {
	select {
	case <-l.stopped:
		return true
	default:
		return false
	}
}

// stop stops the load and waits for its calls to return.
func (l *patroniLoad) stop() {
	l.stopOnce.Do(func() { close(l.stopped) })
	l.wg.Wait()
}

// acksSince is the number of writes acknowledged after t.
func (l *patroniLoad) acksSince(t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, at := range l.acked {
		if at.After(t) {
			n++
		}
	}
	return n
}

// readsSince is the number of reads that succeeded after t.
func (l *patroniLoad) readsSince(t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, _ := slices.BinarySearchFunc(l.reads, t, time.Time.Compare)
	return len(l.reads) - i
}

// writableWatch asks some members, each on a connection of its own, for
// pg_is_in_recovery() about every millisecond, and keeps the first member
// seen out of recovery and when.
type writableWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex // guards the fields below
	m  *pgtest.PatroniMember
	at time.Time
}

func watchWritable(ctx context.Context, members []*pgtest.PatroniMember) *writableWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &writableWatch{cancel: cancel}
	for _, m := range members {
		w.wg.Go(func() {
			var conn *pgx.Conn
			defer func() {
				if conn != nil {
					conn.Close(context.Background())
				}
			}()
			for ctx.Err() == nil {
				if conn == nil {
					cctx, cancel := context.WithTimeout(ctx, time.Second)
					c, err := pgx.Connect(cctx, m.ConnString("connect_timeout=1"))
					cancel()
					if err != nil {
						time.Sleep(time.Millisecond)
						continue
					}
					conn = c
				}
				var inRecovery bool
				qctx, cancel := context.WithTimeout(ctx, time.Second)
				err := conn.QueryRow(qctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery)
				cancel()
				now := time.Now()
				switch {
				case err != nil:
					conn.Close(context.Background())
					conn = nil
				case !inRecovery:
					w.mu.Lock()
					if w.m == nil || now.Before(w.at) {
						w.m, w.at = m, now
					}
					w.mu.Unlock()
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	return w
}

// result returns the first member seen out of recovery and when, or nil.
func (w *writableWatch) result() (*pgtest.PatroniMember, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m, w.at
}

// stop ends the polling and waits for it.
func (w *writableWatch) stop() {
	w.cancel()
	w.wg.Wait()
}
