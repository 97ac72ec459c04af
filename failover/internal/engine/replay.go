package engine

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/internal/outcome"
	"github.com/pgfailover/pgfailover/internal/sqlclass"
)

// replayKey is the context key of a caller's replay override.
type replayKey struct{}

type replayMode uint8

const (
	replayClassify replayMode = iota // decide from the SQL text
	replayNever
	replayAlways
)

// NoRetry returns a context under which a statement that reached a server
// is never run again (failover.NoRetry).
func NoRetry(ctx context.Context) context.Context {
	return context.WithValue(ctx, replayKey{}, replayNever)
}

// ReplaySafe returns a context under which Query, QueryRow and SendBatch
// treat their statements as safe to run again, and as not writing
// (failover.ReplaySafe).
func ReplaySafe(ctx context.Context) context.Context {
	return context.WithValue(ctx, replayKey{}, replayAlways)
}

func modeOf(ctx context.Context) replayMode {
	m, _ := ctx.Value(replayKey{}).(replayMode)
	return m
}

// classes remembers which statements the classifier found replay-safe,
// so that a statement the application sends over and over (the usual
// case: SQL is written in code, its values are parameters) is read once.
// A statement's policy is needed when it fails, and when it succeeds
// while a write is recorded (Engine.recordsWrites: the Reader is in use, or
// the call carries a CausalToken): then it says whether the call may have
// written, which arms the Reader's pin_after_write and advances the
// token (see call.done). Otherwise a success asks nothing of it.
//
// A lookup writes nothing shared: the map is replaced, never modified, so
// callers on every core read it without a lock. It holds at most
// classesMax statements of at most classesMaxLen bytes; others are
// classified on every call.
type classes struct {
	known atomic.Pointer[map[string]bool] // statement → replay-safe
	mu    sync.Mutex                      // serializes the copies made to add a statement; no I/O while held
}

const (
	classesMax    = 1024
	classesMaxLen = 4096
)

// replaySafe reports whether sql is replay-safe (sqlclass.ReplaySafe).
func (k *classes) replaySafe(sql string) bool {
	var known map[string]bool
	if m := k.known.Load(); m != nil {
		known = *m
		if safe, ok := known[sql]; ok {
			return safe
		}
	}
	safe := sqlclass.ReplaySafe(sql)
	if len(known) < classesMax && len(sql) <= classesMaxLen {
		k.add(sql, safe)
	}
	return safe
}

// Classified returns how many statements the engine keeps the
// classification of.
func (e *Engine) Classified() int {
	if m := e.classes.known.Load(); m != nil {
		return len(*m)
	}
	return 0
}

// add publishes a copy of the map with sql added.
func (k *classes) add(sql string, safe bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var old map[string]bool
	if m := k.known.Load(); m != nil {
		old = *m
	}
	if _, ok := old[sql]; ok || len(old) >= classesMax {
		return
	}
	next := make(map[string]bool, len(old)+1)
	for q, v := range old {
		next[q] = v
	}
	next[strings.Clone(sql)] = safe
	k.known.Store(&next)
}

// queryPolicy is the policy of a query none of whose rows reached the
// caller yet. It is computed when the query ends, failed or not: after a
// failure it says whether the query may run again, and after a success
// its writes bit says whether the query may have written. Unless the
// context sets the replay mode, it is the classification of the
// SQL, read once per distinct statement (classes), as for execPolicy and
// batchPolicy.
func (k *classes) queryPolicy(ctx context.Context, sql string) outcome.Rule {
	switch modeOf(ctx) {
	case replayAlways:
		return outcome.Idempotent
	case replayNever:
		return outcome.WriteOnce
	}
	if k.replaySafe(sql) {
		return outcome.Idempotent
	}
	return outcome.WriteOnce
}

// execPolicy is the policy of Exec. Exec is never replayed once its
// statement reached a server, whatever the context says; a read cut off in
// flight is a plain error, anything else (and anything under NoRetry) has
// an unknown outcome.
func (k *classes) execPolicy(ctx context.Context, sql string) outcome.Rule {
	if modeOf(ctx) != replayNever && k.replaySafe(sql) {
		return outcome.ReadOnce
	}
	return outcome.WriteOnce
}

// batchPolicy is the policy of a batch none of whose results reached the
// caller: replayable only when every statement in it is.
func (k *classes) batchPolicy(ctx context.Context, b *pgx.Batch) outcome.Rule {
	switch modeOf(ctx) {
	case replayAlways:
		return outcome.Idempotent
	case replayNever:
		return outcome.WriteOnce
	}
	for _, q := range b.QueuedQueries {
		if !k.replaySafe(q.SQL) {
			return outcome.WriteOnce
		}
	}
	return outcome.Idempotent
}
