package kubeapi

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/url"
	"time"
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
// this version is too old (410 Gone) it lists again, and Replace gets the
// whole collection. Failures are retried after a pause that doubles from
// Backoff.Initial to Backoff.Max, jittered.
type Reflector struct {
	Client *Client
	Path   string     // the collection, /api/v1/namespaces/db/pods say
	Query  url.Values // labelSelector, fieldSelector
	// Backoff is the pause after a failure; the zero value means 100ms
	// doubling to 5s.
	Backoff Backoff
}

// Backoff is the range of pauses after failures in a row.
type Backoff struct{ Initial, Max time.Duration }

// Run lists and watches until ctx ends.
func (r *Reflector) Run(ctx context.Context, h Handler) {
	b := r.Backoff
	if b.Initial <= 0 {
		b.Initial = 100 * time.Millisecond
	}
	if b.Max < b.Initial {
		b.Max = max(5*time.Second, b.Initial)
	}
	pause := b.Initial
	wait := func() bool {
		d := pause/2 + rand.N(pause/2+1) // [1/2, 1] of it
		pause = min(2*pause, b.Max)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
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
		start, events := time.Now(), 0
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
		lasted := time.Since(start) > 10*time.Second || events > 0
		switch {
		case IsGone(err):
			rv = "" // list again, now
			continue
		case err != nil:
			h.Failed(err)
		case lasted:
			pause = b.Initial
			continue // the server ended a watch that served: watch again now
		}
		if lasted {
			pause = b.Initial
		}
		if !wait() {
			return
		}
	}
}
