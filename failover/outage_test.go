package failover_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// The drills below crash the primary under a service that writes rows
// through the Pool and reads each one back through the Reader (two
// writers), while four readers count the rows through the Reader; a
// replica is promoted once the primary has been down for outageLength
// and the readers have read through the outage. They count what the
// Reader's reads did meanwhile.

// outageLength is how long the primary stays down in the drills, as in
// the scenario they reproduce: the primary crashed, a replica promoted
// two seconds later.
const outageLength = 2 * time.Second

// outageDrill is one drill's service and what its reads did.
type outageDrill struct {
	t    *testing.T
	ctx  context.Context
	pool *failover.Pool
	// lagging is the port of a replica no read that needs a write may
	// land on; 0 for none.
	lagging int

	started time.Time    // when the service started
	next    atomic.Int64 // the last id written
	writes  atomic.Int64 // writes acknowledged
	reads   atomic.Int64 // successful Reader reads

	mu        sync.Mutex  // guards the fields below
	succeeded []time.Time // when each successful Reader read returned
	failed    []error     // Reader reads that failed
	missed    []int64     // writes a read-back missed, though acknowledged
	onLagging int         // Reader reads that landed on the lagging replica
}

// startOutageDrill creates the drill's table on c's primary, waits until
// the Pool knows replicas replicas, and starts the writers and readers.
// They stop at the end of the test at the latest.
func startOutageDrill(t *testing.T, ctx context.Context, c *pgtest.Cluster, pool *failover.Pool, replicas int) *outageDrill {
	t.Helper()
	if _, err := pool.Exec(ctx, "CREATE TABLE drill (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	waitReplicasKnown(t, pool, replicas)
	return &outageDrill{t: t, ctx: ctx, pool: pool}
}

// run starts the writers and readers, and returns what stops them.
func (d *outageDrill) run() (stop func()) {
	d.started = time.Now()
	writers := startLoop(d.t, 2, d.writeAndReadBack)
	readers := startLoop(d.t, 4, d.count)
	return func() {
		writers.stop()
		readers.stop()
	}
}

// writeAndReadBack inserts the next id and, once acknowledged, reads it
// back through the Reader. A write that fails, its outcome known or not,
// is not read back: it was never acknowledged.
func (d *outageDrill) writeAndReadBack() {
	id := d.next.Add(1)
	if _, err := d.pool.Exec(d.ctx, "INSERT INTO drill VALUES ($1)", id); err != nil {
		return
	}
	d.writes.Add(1)
	var n, port int
	err := d.pool.Reader().QueryRow(d.ctx, "SELECT count(*)::int, current_setting('port')::int FROM drill WHERE id = $1", id).Scan(&n, &port)
	d.read(err, port)
	if err == nil && n != 1 {
		d.mu.Lock()
		d.missed = append(d.missed, id)
		d.mu.Unlock()
	}
}

// count reads the number of rows through the Reader.
func (d *outageDrill) count() {
	var n, port int
	err := d.pool.Reader().QueryRow(d.ctx, "SELECT count(*)::int, current_setting('port')::int FROM drill").Scan(&n, &port)
	d.read(err, port)
}

// read records the outcome of a Reader read that returned now.
func (d *outageDrill) read(err error, port int) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case err != nil && d.ctx.Err() == nil:
		d.failed = append(d.failed, err)
	case err == nil:
		d.reads.Add(1)
		d.succeeded = append(d.succeeded, now)
		if port == d.lagging {
			d.onLagging++
		}
	}
}

// readsBetween returns how many Reader reads succeeded in [from, to], the
// longest time in that span without one returning, and when that time
// ended, counted from from.
func (d *outageDrill) readsBetween(from, to time.Time) (n int, longest, endedAt time.Duration) {
	d.mu.Lock()
	times := slices.Clone(d.succeeded)
	d.mu.Unlock()
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	last := from
	for _, at := range append(times, to) {
		if at.Before(from) || at.After(to) {
			continue
		}
		if at != to {
			n++
		}
		if gap := at.Sub(last); gap > longest {
			longest, endedAt = gap, at.Sub(from)
		}
		last = at
	}
	return n, longest, endedAt
}

// outcome is what a drill found between the crash and the promotion.
type outcome struct {
	outage     time.Duration // from the crash to the promotion
	during     int           // Reader reads that succeeded meanwhile
	longestGap time.Duration // the longest time meanwhile without one
	gapEnded   time.Duration // when it ended, after the crash
	// gapBefore is the longest time without one in the outageLength
	// before the crash: what the machine's load alone makes of the
	// service.
	gapBefore time.Duration
	// replayedAll says whether the replica promoted had replayed all the
	// WAL it received when it was promoted (when it had not, the WAL it
	// received ended inside a record, which no replica can replay).
	replayedAll bool
	// missedKept is how many of the writes a read missed the new primary
	// holds: a read that missed a write the promotion kept.
	missedKept int
}

// crashAndPromote runs the service, crashes c's primary (immediate
// shutdown) once 20 writes were read back and the service has run a
// second longer than the outage will last, waits until it has been down
// for outageLength and, when readsExpected and next has replayed all it
// received, until the Reader served reads meanwhile, then promotes next,
// which will need no synchronous standby. It waits until the Pool has
// read 20 more writes back, and stops the service.
func (d *outageDrill) crashAndPromote(c *pgtest.Cluster, next *pgtest.Node, readsExpected bool) outcome {
	stop := d.run()
	defer stop()
	t := d.t
	// The service's first moments (connections opening) stay out of the
	// stretch before the crash that the outage is compared with.
	waitUntil(t, 30*time.Second, "the service running longer than the outage will last", func() bool {
		return d.writes.Load() > 20 && time.Since(d.started) > outageLength+time.Second
	})
	crashed := time.Now()
	if err := c.Primary().Stop(d.ctx, pgtest.Immediate); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, time.Minute, "the outage's length", func() bool { return time.Since(crashed) >= outageLength })
	var o outcome
	o.replayedAll = replayedAllReceived(t, d.ctx, next)
	if readsExpected && o.replayedAll {
		waitUntil(t, 30*time.Second, "reads through the outage", func() bool {
			n, _, _ := d.readsBetween(crashed, time.Now())
			return n >= 20
		})
	}
	promoting := time.Now()
	if err := c.Promote(d.ctx, next); err != nil {
		t.Fatal(err)
	}
	o.outage = promoting.Sub(crashed)
	o.during, o.longestGap, o.gapEnded = d.readsBetween(crashed, promoting)
	_, o.gapBefore, _ = d.readsBetween(crashed.Add(-outageLength), crashed)
	from := d.writes.Load()
	waitUntil(t, 30*time.Second, "writes read back after the promotion", func() bool { return d.writes.Load() > from+20 })
	stop()
	d.mu.Lock()
	missed := slices.Clone(d.missed)
	d.mu.Unlock()
	if err := d.pool.QueryRow(d.ctx, "SELECT count(*)::int FROM drill WHERE id = ANY($1)", missed).Scan(&o.missedKept); err != nil {
		t.Fatal(err)
	}
	return o
}

// replayedAllReceived reports whether the standby n has replayed all the
// WAL it received.
func replayedAllReceived(t *testing.T, ctx context.Context, n *pgtest.Node) bool {
	t.Helper()
	conn, err := n.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var all bool
	q := "SELECT coalesce(pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn(), false)"
	waitUntil(t, 10*time.Second, "the standby's positions", func() bool { return conn.QueryRow(ctx, q).Scan(&all) == nil })
	return all
}

// waitReplayPaused waits until the standby n has paused its replay, not
// only been asked to.
func waitReplayPaused(t *testing.T, ctx context.Context, n *pgtest.Node) {
	t.Helper()
	conn, err := n.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	waitUntil(t, 10*time.Second, "replay paused on "+n.Name(), func() bool {
		var state string
		return conn.QueryRow(ctx, "SELECT pg_get_wal_replay_pause_state()").Scan(&state) == nil && state == "paused"
	})
}

// report logs what the drill found and fails the test on any failed read
// or read that missed its own write.
func (d *outageDrill) report(name string, o outcome, reasons map[string]int64) {
	t := d.t
	d.mu.Lock()
	defer d.mu.Unlock()
	t.Logf("%s: outage %v: %d Reader reads during it, longest gap between them %d ms, ending %d ms after the crash (%d ms in the %v before the crash); %d writes acknowledged, %d Reader reads in all, %d failed, %d missed their own write (%d of those writes kept by the promotion); reads by reason: %v",
		name, o.outage.Round(time.Millisecond), o.during, o.longestGap.Milliseconds(), o.gapEnded.Milliseconds(), o.gapBefore.Milliseconds(), outageLength,
		d.writes.Load(), d.reads.Load(), len(d.failed), len(d.missed), o.missedKept, reasons)
	if !o.replayedAll {
		t.Logf("%s: the replica promoted had not replayed all it received (its WAL ended inside a record): no read could be served during the outage", name)
	}
	if len(d.failed) > 0 {
		t.Errorf("%d Reader reads failed; first: %v", len(d.failed), d.failed[0])
	}
	if o.missedKept > 0 {
		t.Errorf("%d writes a read missed survived the promotion: the reads showed less than the replica promoted held", o.missedKept)
	}
}

// TestReaderThroughPrimaryOutage: with synchronous replication and one
// replica, a service that writes and reads its writes back through the
// Reader, with the default settings, keeps reading on the replica while
// the primary is down: no read fails, none misses its own acknowledged
// write, and reads go on between the crash and the promotion.
func TestReaderThroughPrimaryOutage(t *testing.T) {
	skipUnderShort(t)
	c := pgtest.Start(t, pgtest.Options{Replicas: 1, SyncReplication: true})
	ctx := testContext(t)
	metrics, pool := newMeteredPool(t, ctx, c.ConnString(""))
	d := startOutageDrill(t, ctx, c, pool, 1)
	o := d.crashAndPromote(c, c.Replicas()[0], true)
	reasons := readReasons(t, ctx, metrics)
	d.report("synchronous, one replica", o, reasons)
	if len(d.missed) > 0 {
		t.Errorf("%d reads missed their own acknowledged write; first: write %d", len(d.missed), d.missed[0])
	}
	if o.replayedAll && reasons["replica/outage_sync"] == 0 {
		t.Errorf("no read was served by the outage rule: %v", reasons)
	}
}

// TestReaderOutageSkipsLaggingReplica: with synchronous replication, two
// replicas, one of them with replay paused, and every read pinned by the
// service's writes (pin_after_write=1h), no read lands on the lagging
// replica, before, during or after the primary's outage.
func TestReaderOutageSkipsLaggingReplica(t *testing.T) {
	skipUnderShort(t)
	c := pgtest.Start(t, pgtest.Options{Replicas: 2, SyncReplication: true})
	ctx := testContext(t)
	metrics, pool := newMeteredPool(t, ctx, c.ConnString("pin_after_write=1h"))
	d := startOutageDrill(t, ctx, c, pool, 2)
	next, lagging := c.Replicas()[0], c.Replicas()[1]
	if err := lagging.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	waitReplayPaused(t, ctx, lagging)
	// A write the lagging replica cannot have replayed: every read from
	// now on must see it, or a later one.
	if _, err := pool.Exec(ctx, "INSERT INTO drill VALUES (0)"); err != nil {
		t.Fatal(err)
	}
	d.lagging = lagging.Port()
	o := d.crashAndPromote(c, next, false)
	d.report("synchronous, two replicas, one lagging", o, readReasons(t, ctx, metrics))
	if len(d.missed) > 0 {
		t.Errorf("%d reads missed their own acknowledged write; first: write %d", len(d.missed), d.missed[0])
	}
	if d.onLagging > 0 {
		t.Errorf("%d reads that needed a write landed on the lagging replica", d.onLagging)
	}
}

// TestReaderThroughAsyncPrimaryOutage measures the default (outage_reads=
// replica) under asynchronous replication, one replica: reads go on once
// the replica has stopped receiving, showing what it received; an
// acknowledged write it never received is missed, and lost at the
// promotion too. Only a failed read, or one that missed a write the
// promotion kept, fails the test.
func TestReaderThroughAsyncPrimaryOutage(t *testing.T) {
	skipUnderShort(t)
	c := pgtest.Start(t, pgtest.Options{Replicas: 1})
	ctx := testContext(t)
	metrics, pool := newMeteredPool(t, ctx, c.ConnString(""))
	d := startOutageDrill(t, ctx, c, pool, 1)
	o := d.crashAndPromote(c, c.Replicas()[0], false)
	d.report("asynchronous, one replica", o, readReasons(t, ctx, metrics))
}
