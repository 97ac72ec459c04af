package failover

import (
	"context"

	"github.com/pgfailover/pgfailover/failover/internal/engine"
)

// NoRetry returns a context under which a statement that reached a server is
// never run again, whatever its text looks like. Use it for reads that call
// functions with effects the classifier cannot know about (a user-defined
// function that writes, say). A statement that provably never ran (the
// connection was dead before it was sent, or the server refused it before
// running it) still moves to the next host: that cannot run it twice.
func NoRetry(ctx context.Context) context.Context { return engine.NoRetry(ctx) }

// ReplaySafe returns a context under which Query, QueryRow and SendBatch
// treat their statements as safe to run again on another host before any
// row reached the caller (for QueryRow: until the query completes),
// whatever their text looks like. Use it for statements the classifier is
// too cautious about, such as a call of a user-defined function known to
// only read. A statement run under it is taken not to write: it neither
// pins later reads to what it wrote nor advances a CausalToken.
func ReplaySafe(ctx context.Context) context.Context { return engine.ReplaySafe(ctx) }
