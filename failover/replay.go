package failover

import (
	"context"

	"github.com/jackc/pgx/v5"

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

// NoRetry returns a context under which a statement that reached a server is
// never run again, whatever its text looks like. Use it for reads that call
// functions with effects the classifier cannot know about (a user-defined
// function that writes, say). A statement that provably never ran (the
// connection was dead before it was sent, or the server refused it before
// running it) still moves to the next host: that cannot run it twice.
func NoRetry(ctx context.Context) context.Context {
	return context.WithValue(ctx, replayKey{}, replayNever)
}

// ReplaySafe returns a context under which Query, QueryRow and SendBatch
// treat their statements as safe to run again on another host before any
// row reached the caller, whatever their text looks like. Use it for
// statements the classifier is too cautious about, such as a call of a
// user-defined function known to only read.
func ReplaySafe(ctx context.Context) context.Context {
	return context.WithValue(ctx, replayKey{}, replayAlways)
}

func modeOf(ctx context.Context) replayMode {
	m, _ := ctx.Value(replayKey{}).(replayMode)
	return m
}

// queryPolicy is the policy of a query none of whose rows reached the
// caller yet. It is computed when the query ends, failed or not: after a
// failure it says whether the query may run again, and after a success
// its writes bit says whether the query may have written, which arms the
// Reader's pin_after_write and advances a CausalToken (see call.done). So,
// unless the context sets the replay mode, the classifier reads the SQL of
// every statement, successful ones included, as execPolicy and
// batchPolicy do.
func queryPolicy(ctx context.Context, sql string) policy {
	switch modeOf(ctx) {
	case replayAlways:
		return idempotent
	case replayNever:
		return writeOnce
	}
	if sqlclass.ReplaySafe(sql) {
		return idempotent
	}
	return writeOnce
}

// execPolicy is the policy of Exec. Exec is never replayed once its
// statement reached a server, whatever the context says; a read cut off in
// flight is a plain error, anything else (and anything under NoRetry) has
// an unknown outcome.
func execPolicy(ctx context.Context, sql string) policy {
	if modeOf(ctx) != replayNever && sqlclass.ReplaySafe(sql) {
		return readOnce
	}
	return writeOnce
}

// batchPolicy is the policy of a batch none of whose results reached the
// caller: replayable only when every statement in it is.
func batchPolicy(ctx context.Context, b *pgx.Batch) policy {
	switch modeOf(ctx) {
	case replayAlways:
		return idempotent
	case replayNever:
		return writeOnce
	}
	for _, q := range b.QueuedQueries {
		if !sqlclass.ReplaySafe(q.SQL) {
			return writeOnce
		}
	}
	return idempotent
}
