package flight

import (
	"context"
	"sync"
)

// Group runs at most one piece of work at a time and shares its result
// with every caller that asks while it runs. A caller that asks once a run
// has ended starts a new one: a Group keeps no result. The zero Group is
// ready for use; a Group must not be copied after first use.
type Group[T any] struct {
	// mu guards cur and the waiters of every run. No I/O while held.
	mu  sync.Mutex
	cur *run[T]
}

// run is one run of the work.
type run[T any] struct {
	done   chan struct{} // closed when val and err are set
	val    T
	err    error
	cancel context.CancelFunc
	// waiters counts the callers of Do waiting for the run, and one more
	// for a run begun by Start, which no caller's leaving cancels.
	waiters int
}

// Do runs fn, or joins the run under way, and returns its result. fn runs
// on a goroutine of its own with a context that carries ctx's values but
// not its cancellation: a caller that gives up (ctx ends) returns
// ctx.Err() at once and leaves the run to the others, and the last caller
// to leave cancels it and waits for it to end before returning. fn must
// return once its context ends.
func (g *Group[T]) Do(ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	g.mu.Lock()
	r := g.cur
	if r == nil {
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r = g.begin(cancel)
		go g.finish(r, func() (T, error) { return fn(rctx) })
	}
	r.waiters++
	g.mu.Unlock()

	select {
	case <-r.done:
		g.leave(r)
		return r.val, r.err
	case <-ctx.Done():
		if g.leave(r) {
			r.cancel()
			<-r.done
		}
		var zero T
		return zero, ctx.Err()
	}
}

// Start begins fn with ctx, unless a run is under way, and returns a
// channel closed when the run (begun now or before) ends. A run begun by
// Start is never cancelled by callers of Do leaving it: ctx alone bounds
// it. spawn runs the run's goroutine, so that its owner can count it
// (for example sync.WaitGroup.Go).
func (g *Group[T]) Start(ctx context.Context, spawn func(func()), fn func(context.Context) (T, error)) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur != nil {
		return g.cur.done
	}
	rctx, cancel := context.WithCancel(ctx)
	r := g.begin(cancel)
	r.waiters = 1
	spawn(func() { g.finish(r, func() (T, error) { return fn(rctx) }) })
	return r.done
}

// Waiting returns how many callers of Do wait for the run under way, and
// one more for a run begun by Start; 0 when none runs.
func (g *Group[T]) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur == nil {
		return 0
	}
	return g.cur.waiters
}

// begin makes r the run under way. Called with mu held.
func (g *Group[T]) begin(cancel context.CancelFunc) *run[T] {
	r := &run[T]{done: make(chan struct{}), cancel: cancel}
	g.cur = r
	return r
}

// finish performs r and publishes its result. A caller arriving from then
// on starts a new run.
func (g *Group[T]) finish(r *run[T], do func() (T, error)) {
	r.val, r.err = do()
	r.cancel()
	g.mu.Lock()
	if g.cur == r {
		g.cur = nil
	}
	g.mu.Unlock()
	close(r.done)
}

// leave counts one caller out of r and reports whether it was the last.
// The last one detaches r, so that a new caller starts a fresh run rather
// than join one being cancelled.
func (g *Group[T]) leave(r *run[T]) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	r.waiters--
	if r.waiters > 0 {
		return false
	}
	if g.cur == r {
		g.cur = nil
	}
	return true
}
