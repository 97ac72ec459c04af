package failover

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover/internal/engine"
	"github.com/pgfailover/pgfailover/failover/internal/follow"
	"github.com/pgfailover/pgfailover/hosthealth"
)

// Reader sends reads to the replicas. It has no Exec, and every session it
// opens logs in with default_transaction_read_only on, so a statement that
// writes fails (25006), on the primary too. A statement sent through the
// Reader that turns that default off (SET default_transaction_read_only =
// off, SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE) holds for
// the rest of its own call only: the session is closed before another
// read takes it (on PostgreSQL 14 and later, which report the change).
//
// Each read goes round-robin to a replica that is usable and fresh
// enough, those in the client's zone first.
//
// A read sees every write through the same Pool that completed before it
// began (read-your-writes): for pin_after_write after a call that may
// have written (a committed transaction that wrote included, and a write
// whose outcome is unknown: it may have committed), a read goes
// to a replica only when the replica has replayed a position of the
// primary sampled after that write. The newest sample serves when it is
// that recent (the probes take one each health_probe_interval); else the
// read asks the primary for its position, and every read that needs one
// meanwhile shares that one request. Whether a replica has replayed the
// position comes from its last probe, or, when that is older, from the
// replica itself: one more round trip on the replica, on the connection
// the read then uses. A replica that has not replayed it yet is given up
// to replica_wait to do so, asked again from 200µs apart, the gap doubling
// up to 2ms.
// The primary takes the read instead when:
//
//   - a write through the Pool completed less than pin_after_write ago
//     and no replica has replayed it within replica_wait, or no sample of
//     the current primary taken after the write could be had (after a
//     change of primary, reads pinned by a write go to the primary until
//     the new one is sampled), unless no primary is usable (below);
//   - every replica is down, in the wrong role, or stale past max_lag;
//   - there is no replica at all (New does not need one).
//
// While no host is usable as the primary (the primary's failure was seen
// and no host has been found writable since), a read that must see
// writes (pinned by one, or with a CausalToken) that no replica is known
// to have replayed does not wait for a primary; with outage_reads=replica
// (the default) it follows the outage rule. Its position is the end of
// the most WAL any replica holds (pg_last_wal_receive_lsn, or the replay
// position when further), over every replica whose last probe was
// answered, each looked at after the writes the read must see: after the
// last write through the Pool for a pinned read; for one with a token,
// after the rule was first applied to it (its writes were acknowledged
// before it began). The probes look, and a read finding a replica
// not looked at since looks itself, once per replica: one round trip on
// the connection it then uses, which every later read can count on. A
// replica that has replayed that position takes the read, given up to
// replica_wait to get there, as for a read's own position. The position
// counts:
//
//   - with synchronous replication (the primary last probed had
//     synchronous_standby_names set, and synchronous_commit on or
//     remote_apply in the probe's session), at once: a commit is
//     acknowledged only once a standby has flushed it, so the read sees
//     every write acknowledged before it, provided every standby that can
//     acknowledge one is among the replicas counted;
//   - otherwise (and when the primary was never probed) only once no
//     replica counted has a WAL receiver connected to a sender
//     (pg_stat_wal_receiver): none can receive more, so the read sees
//     every write that any promotion of them can keep, and misses an
//     acknowledged write that reached none of them, which that promotion
//     loses too. A replica a read looks at whose receiver is still
//     connected is asked again within the same replica_wait: it takes a
//     receiver a moment to see its sender go.
//
// When the position cannot be had yet, or no replica has replayed it
// (the WAL a replica received ends inside a record, which it cannot
// replay until more comes; its replay is paused), the read waits as
// before, until a primary is usable or a probe or another read's check
// shows a replica that qualifies, and fails with the same typed errors.
// With outage_reads=wait every such read waits. Once a host is usable as
// the primary the rule no longer applies: a read picks again by the rules
// above, and positions of the old primary's timeline are never compared
// with the new one's. The reads sent by the rule count in
// pgfailover.reads with the reason outage_sync or outage_async.
//
// When a replica fails under a read, a read that is safe to replay moves
// to the next replica, then to the primary, under the same rules and
// typed errors as the Pool's calls. With max_lag set and every replica
// stale, reads go to the primary; if the primary is down as well they
// wait for one like any call, and fail with a *FailoverError whose Hosts
// say why each host was passed over (a *ReplicaLagError for a stale
// replica). With max_lag unset, replicas keep serving reads while the
// primary is down, those that must see writes under the outage rule.
//
// The Reader does not depend on the Pool's target: the Pool's calls go
// where target says, without the staleness gate, and the Reader always
// reads from the freshest-enough replicas. Both see the same hosts.
//
// A Reader is safe for concurrent use. Get it from Pool.Reader.
type Reader struct {
	p      *Pool
	r      *engine.Reader
	follow atomic.Pointer[follow.Pool] // PgxPool's pool, nil until first asked for; built under Pool.followMu
}

// Reader returns the Pool's Reader. Until it is first called, the Pool
// does not time its writes for pin_after_write; the first call counts as
// a write completed then if any call went through the Pool before, so
// the reads of the first pin_after_write after it are pinned as after a
// write. Get the Reader once, when the Pool is made, to avoid that.
func (p *Pool) Reader() *Reader {
	p.eng.TakeReader()
	return p.reader
}

// Query runs a read and returns its rows, as Pool.Query does, on a replica
// or (see Reader) the primary, in a read-only session.
func (r *Reader) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return r.r.Query(ctx, sql, args...)
}

// QueryRow runs a read expected to return at most one row, as
// Pool.QueryRow does, on a replica or the primary.
func (r *Reader) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return r.r.QueryRow(ctx, sql, args...)
}

// SendBatch sends a batch of reads, as Pool.SendBatch does, on a replica
// or the primary. A statement in it that writes fails.
func (r *Reader) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return r.r.SendBatch(ctx, b)
}

// ErrReadWriteTx is returned by Reader.BeginTx when asked for a
// read-write transaction.
var ErrReadWriteTx = errors.New("pgfailover: the Reader begins read-only transactions only")

// BeginTx begins a read-only transaction on a replica or the primary. The
// zero AccessMode means read-only here; pgx.ReadWrite is refused with
// ErrReadWriteTx. Like Pool.BeginTx, the transaction stays on its host.
func (r *Reader) BeginTx(ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error) {
	if txOptions.AccessMode == pgx.ReadWrite {
		return nil, ErrReadWriteTx
	}
	return r.r.BeginTx(ctx, txOptions)
}

// ReplicaLagError says why the replica at Addr was passed over: its
// staleness bound was unknown, or above MaxLag (max_lag). Known is false
// when the replica was never probed, its probe failed, or it has replayed
// nothing yet; Bound is the staleness bound when Known.
type ReplicaLagError = engine.ReplicaLagError

// PgxPool returns a genuine *pgxpool.Pool for reads, for libraries that
// need the concrete type (see failover/stdlib.OpenReaderDB). Its sessions
// are read-only. Each new connection goes where the Reader would send a
// read (a fresh-enough replica in turn, same zone first, else the
// primary), and stays there while it lives: an idle connection is handed
// out only while its host would still take a read (a replica within
// max_lag, or the primary while no replica is), so connections drift back
// to the replicas as they recover. Reads are routed per connection, not
// per statement: read-your-writes (pin_after_write, replica_wait) and
// causal tokens do not apply, and nothing is replayed.
// It is built on first use; Pool.Close closes it.
func (r *Reader) PgxPool() *pgxpool.Pool {
	if f := r.follow.Load(); f != nil {
		return f.PgxPool
	}
	p := r.p
	p.followMu.Lock()
	defer p.followMu.Unlock()
	if f := r.follow.Load(); f != nil {
		return f.PgxPool
	}
	f := p.newFollower(true, hosthealth.TargetAny, r.r.ConnUsable)
	r.follow.Store(f)
	if p.eng.Closed() {
		f.PgxPool.Close() // Close may have looked for it before it existed
	}
	return f.PgxPool
}
