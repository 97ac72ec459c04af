package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/url"
	"time"

	"github.com/pgfailover/pgfailover/internal/backoff"
	"github.com/pgfailover/pgfailover/internal/clock"
)

// Handler receives what a Reflector learns. Its functions are called
// from the Reflector's goroutine, one at a time.
type Handler struct {
	// Replace gets the whole collection after each list.
	Replace func(items []json.RawMessage)
	// Apply gets each ADDED, MODIFIED and DELETED event of a watch.
	Apply func(Event)
	// Failed gets each failed list or watch; the Reflector tries again.
	Failed func(error)
}

// Reflector keeps a caller up to date with one collection: it lists it,
// then watches from the list's resourceVersion. After a watch ends or
// drops it watches again from the last resourceVersion it saw (an event's
// or a bookmark's), so no change is missed; when the server answers that
// this version is too old (410 Gone), or sent an event it could not read
// (ErrUndecodable), it lists again, and Replace gets the whole collection. Failures are retried after a pause on the Backoff
// curve, drawn with equal jitter.
type Reflector struct {
	Client *Client
	Path   string     // the collection, /api/v1/namespaces/db/pods say
	Query  url.Values // labelSelector, fieldSelector
	// Backoff is the curve of pauses after failures in a row; the zero
	// value means 100ms doubling to 5s.
	Backoff backoff.Exponential
	// Clock times the pauses and the watches; nil means the wall clock.
	Clock clock.Clock
}

// servedFor is how long a watch that saw no event must have lasted to
// count as one that served: the server ending it then is routine, and
// the next watch starts at once.
const servedFor = 10 * time.Second

// Run lists and watches until ctx ends.
func (r *Reflector) Run(ctx context.Context, h Handler) {
	curve, clk := r.Backoff, r.Clock
	if curve.Initial <= 0 {
		curve.Initial = 100 * time.Millisecond
	}
	if curve.Max < curve.Initial {
		curve.Max = max(5*time.Second, curve.Initial)
	}
	if clk == nil {
		clk = clock.Real()
	}
	failures := 0 // in a row
	wait := func() bool {
		failures++
		t := clk.NewTimer(backoff.DrawEqual(curve.Base(failures), rand.Int64N))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
			return true
		}
	}
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			l, err := r.Client.List(ctx, r.Path, r.Query)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				h.Failed(err)
				if !wait() {
					return
				}
				continue
			}
			rv = l.ResourceVersion
			h.Replace(l.Items)
		}
		start, events := clk.Now(), 0
		err := r.Client.Watch(ctx, r.Path, r.Query, rv, func(ev Event) {
			rv = ev.ResourceVersion
			if ev.Type != "BOOKMARK" {
				events++
				h.Apply(ev)
			}
		})
		if ctx.Err() != nil {
			return
		}
		served := events > 0 || clk.Now().Sub(start) > servedFor
		if served {
			failures = 0 // the next failure starts the curve again
		}
		switch {
		case IsGone(err):
			rv = "" // list again, now
			continue
		case errors.Is(err, ErrUndecodable):
			rv = "" // list again after the pause: the same event would come back
			h.Failed(err)
		case err == nil && served:
			continue // the server ended a watch that served: watch again now
		case err != nil:
			h.Failed(err)
		}
		if !wait() {
			return
		}
	}
}
