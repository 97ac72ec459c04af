package probe

import (
	"context"
	"time"

	"github.com/pgfailover/pgfailover/internal/clock"
)

// Subject is what a probe loop needs of the Pool for one host. Its methods
// are called from the loop's goroutine only.
type Subject interface {
	// Wake returns the channel the first call to wait for a usable host
	// closes. The loop reads it before Wait, so that a first waiter that
	// arrives in between closes this very channel.
	Wake() <-chan struct{}
	// Wait reports whether calls wait for a usable host, and since when.
	Wait() Wait
	// ClaimedPrimary reports whether a topology source names the host the
	// primary.
	ClaimedPrimary() bool
	// Watchable reports whether the host is a replica whose promotion
	// would make it usable, and its probe connection can watch for it.
	Watchable() bool
	// InUse reports whether the Pool uses the host now: its calls or its
	// Reader may go there. One it does not is Dormant.
	InUse() bool
	// Probe runs one probe under plan and records what it found; waiting
	// says whether calls wait for a usable host as it begins. It returns
	// what the probe came to (FindingOf its error, or Lagging).
	Probe(ctx context.Context, plan Plan, waiting bool) Finding
}

// Loop probes one host on a Schedule until its context ends.
type Loop struct {
	Schedule Schedule
	Clock    clock.Clock
	// Hint receives when a topology source names the host the new
	// primary: the host is then probed at once (Schedule.Hinted).
	Hint <-chan struct{}
	// Nudge receives when the Pool starts using the host (Subject.InUse):
	// the loop computes its next probe again.
	Nudge <-chan struct{}
	Host  Subject
}

// Run runs the loop: every Schedule.Idle while no call waits (less often
// for a host the Pool does not use, see Subject.InUse), faster while
// calls wait for a usable host, with a backoff of its own while the host
// cannot be reached, through fresh connections while the host's name may
// lag behind a promotion, and at once on a hint. It returns when ctx
// ends.
func (l Loop) Run(ctx context.Context) {
	s, clk, h := l.Schedule, l.Clock, l.Host
	st := State{Last: clk.Now()}
	for {
		wake := h.Wake()
		st.Dormant = !h.InUse()
		now := clk.Now()
		w := h.Wait()
		claimed := h.ClaimedPrimary()
		at := s.Next(st, w, claimed, now)
		if plan := s.Watch(st, w, claimed, h.Watchable(), now); plan.Checks > 0 {
			at = s.AfterWatch(st, plan) // the watch itself waited
		}
		why := l.sleepUntil(ctx, at, wake)
		if why == wokenByWaiter {
			// The first waiter wakes every probe at once, but a host
			// inside its own backoff waits for its end.
			why = l.sleepUntil(ctx, s.Woken(st, clk.Now()), nil)
		}
		switch why {
		case stopped:
			return
		case nudged:
			continue
		case hinted:
			st = s.Hinted(st, clk.Now())
			continue
		}
		st.Began = clk.Now()
		w = h.Wait()
		plan := Plan{
			Watch: s.Watch(st, w, h.ClaimedPrimary(), h.Watchable(), st.Began),
			Fresh: s.Fresh(st, w, st.Began),
		}
		if plan.Fresh {
			st.FreshAt = time.Time{} // the next one is drawn from this probe's end
		}
		o := h.Probe(ctx, plan, w.Waiting)
		st = s.Observe(st, o, w, clk.Now())
	}
}

// wakeup is why a probe loop's sleep ended.
type wakeup int

const (
	timeUp        wakeup = iota // the time it slept until came
	wokenByWaiter               // the first call to wait closed the wake channel
	hinted                      // the topology source named the host the new primary
	nudged                      // the Pool started using the host
	stopped                     // the loop's context ended
)

// sleepUntil waits on the loop's clock until at, until wake closes or a
// hint arrives, or until ctx ends, and says which came first. When at has
// passed it does not wait, but a hint already pending still counts: a
// replica watched without a pause between its watches (each watch waits
// itself) must still hear that it was named the primary.
func (l Loop) sleepUntil(ctx context.Context, at time.Time, wake <-chan struct{}) wakeup {
	d := at.Sub(l.Clock.Now())
	if d <= 0 {
		if ctx.Err() != nil {
			return stopped
		}
		select {
		case <-l.Hint:
			return hinted
		default:
			return timeUp
		}
	}
	t := l.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return stopped
	case <-t.C():
		return timeUp
	case <-wake:
		return wokenByWaiter
	case <-l.Hint:
		return hinted
	case <-l.Nudge:
		return nudged
	}
}
