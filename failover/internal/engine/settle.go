package engine

import (
	"slices"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/backoff"
	"github.com/pgfailover/pgfailover/internal/outcome"
)

// How a call's attempt is settled: the outcome decision applied, the
// call's failover episode (its span, deadline and each host's outcome),
// and the error the caller gets when the call cannot complete.

// done settles an attempt on c.host. err is what the attempt returned and
// rule what the statement allows. done returns nil on success, errRetry
// when the caller should try the next host, and otherwise the error to
// hand back. A success with rule including outcome.MayWrite tells the Pool
// that data may have changed, and so does such a failure whose outcome is
// unknown (it may have committed). Once a call is settled, later errors (a rows
// or batch closed after its error was returned) pass through unchanged and
// are not counted again.
//
// A failure is described (what the error and the statement say), the
// call's progress is read, outcome.Decide decides, and apply marks the
// host and carries the decision out.
func (c *call) done(err error, rule outcome.Rule) error {
	if c.is(settledOnce) {
		return err
	}
	if err == nil {
		if rule&outcome.MayWrite != 0 && c.picker.reads == nil {
			c.e.wrote(c.ctx, c.host)
		}
		c.finish(nil)
		return nil
	}
	f, err := outcome.Describe(err, outcome.Call, rule, c.picker.target)
	c.progress(&f)
	d := outcome.Decide(f)
	if d.Verdict == outcome.FailUnknown && rule&outcome.MayWrite != 0 && c.picker.reads == nil {
		c.e.mayHaveWritten(c.ctx)
	}
	return c.apply(d, err)
}

// connectFailed settles a failed acquire of a connection of c.host as
// done settles an attempt, in outcome.Connect's phase: gone says that the
// host left the topology, or was found unusable, while the call waited
// for it. A caller that gave up while it waited gets an error that says
// so, and errors.Is still finds its context's error.
func (c *call) connectFailed(err error, gone bool) error {
	f, err := outcome.Describe(err, outcome.Connect, outcome.Idempotent, c.picker.target)
	f.HostGone = gone
	c.progress(&f)
	if f.CallerDone {
		err = &acquireWaitError{err: err}
	}
	return c.apply(outcome.Decide(f), err)
}

// progress adds to f the call's progress as it stood before this
// failure. A failure that starts the call's episode (Record) leaves
// FailedOver and TimeLeft as they were for the decision: the decision
// reads FailedOver only when the caller gave up, which records nothing,
// and a new episode's deadline lies a positive budget ahead.
func (c *call) progress(f *outcome.Failure) {
	f.CallerDone = outcome.CallerDone(c.ctx)
	f.FailedOver, f.Attempts, f.MaxAttempts, f.TimeLeft = c.is(episode), c.events().attempts, c.e.MaxAttempts, c.timeLeft()
}

// apply carries out decision d on a failed attempt: the host's health (and
// the topology source's view), the call's failover episode, which a first
// event starts; a counted attempt holds the host back for a backoff before
// the call may send there again; the call then retries, or ends with err as
// the verdict says.
func (c *call) apply(d outcome.Decision, err error) error {
	if d.Mark {
		c.e.Hosts.MarkFailed(c.host, c.epoch, d.Meaning, err)
	}
	if d.Record {
		c.record(d.Meaning, err)
	}
	if d.Note {
		c.noteFirst(c.host.Addr, err)
	}
	if d.Counts {
		c.holdBack()
	}
	switch d.Verdict {
	case outcome.TryNext:
		return errRetry
	case outcome.FailHost:
		return c.settled(nil, err)
	case outcome.FailUnknown, outcome.FailInterrupted:
		return c.settled(errorKind(d.Verdict), err)
	case outcome.FailBudget:
		if outcome.CallerDone(c.ctx) {
			c.note(c.host.Addr, err)
			return c.giveUp(ErrBudgetExhausted, c.ctx.Err())
		}
		return c.giveUp(ErrBudgetExhausted, nil)
	}
	c.finish(err)
	return err
}

// holdBack counts a failed attempt on c.host and holds the host back for
// a backoff before the call may send there again.
func (c *call) holdBack() {
	ev := c.events()
	ev.attempts++
	ev.failed = append(ev.failed, c.host.Addr)
	if ev.backoff == nil {
		ev.backoff = backoff.NewFullJitter(c.e.BackoffInitial, c.e.BackoffMax)
	}
	ev.notBefore = c.e.Clock.Now().Add(ev.backoff.NextBackOff())
}

// timeLeft reports whether the failover budget has time left.
func (c *call) timeLeft() bool {
	return !c.is(episode) || c.e.Clock.Now().Before(c.ev.deadline)
}

// failedOn reports whether this call failed on addr already.
func (c *call) failedOn(addr string) bool {
	if c.ev == nil {
		return false
	}
	for _, a := range c.ev.failed {
		if a == addr {
			return true
		}
	}
	return false
}

// settled ends a call that met a failover event and cannot complete: the
// error names the host and, with kind, what the failure means.
func (c *call) settled(kind, err error) error {
	he := &HostError{Kind: kind, Addr: c.hostAddr(), Err: err}
	c.finish(he)
	return he
}

// finish records the outcome of the call, once. A call that met a failover
// episode counts as survived (err nil) or failed, and its episode's span
// ends. Inside RunTx the transaction function is what counts, so the call
// only tells RunTx it failed over.
func (c *call) finish(err error) {
	if c.is(settledOnce) {
		return
	}
	c.set(settledOnce, true)
	if !c.is(episode) {
		return
	}
	if c.ev.waited > 0 {
		c.e.Telemetry.Waited(c.ctx, c.ev.span, c.ev.waited)
		c.e.Hosts.DropUnusedStandbys()
	}
	outcome := callOutcome(err)
	c.e.Telemetry.EndEpisode(c.ctx, c.ev.span, int(c.tries), outcome, err)
	c.e.Log.Episode(c.firstFailed(), c.hostAddr(), outcome, int(c.tries), c.ev.waited, err)
	if st, ok := c.ctx.Value(insideRunTx{}).(*runTxState); ok {
		st.failedOver = true
		return
	}
	c.e.Telemetry.Counted(c.ctx, outcome)
}

// firstFailed is the address of the host the call's episode met its
// first failover event on, which limits how often its episodes are logged.
func (c *call) firstFailed() string {
	if len(c.ev.outcomes) > 0 {
		return c.ev.outcomes[0].Addr
	}
	return c.hostAddr()
}

// hostAddr is the address of the call's current host, "" when none.
func (c *call) hostAddr() string {
	if c.host == nil {
		return ""
	}
	return c.host.Addr
}

// startEpisode begins the call's failover episode, once: its span, and the
// deadline that bounds every wait and attempt from now on.
func (c *call) startEpisode() {
	if c.is(episode) {
		return
	}
	c.set(episode, true)
	ev := c.events()
	ev.deadline = c.e.Clock.Now().Add(c.e.Steer.Budget(c.e.MaxDuration))
	ev.span = c.e.Telemetry.StartEpisode(c.ctx)
}

// record notes a failover event on the current host.
func (c *call) record(class hosthealth.Class, err error) {
	c.startEpisode()
	c.note(c.host.Addr, err)
	c.e.Telemetry.HostFailed(c.ev.span, c.host.Server, class, err)
}

// noteFirst keeps err as host addr's outcome unless it has one.
func (c *call) noteFirst(addr string, err error) {
	for _, o := range c.events().outcomes {
		if o.Addr == addr {
			return
		}
	}
	c.note(addr, err)
}

// note keeps err as the last outcome of host addr.
func (c *call) note(addr string, err error) {
	ev := c.events()
	for i := range ev.outcomes {
		if ev.outcomes[i].Addr == addr {
			ev.outcomes[i].Err = err
			return
		}
	}
	ev.outcomes = append(ev.outcomes, HostError{Addr: addr, Err: err})
}

// giveUp ends the call with kind, listing each host's last outcome.
func (c *call) giveUp(kind, cause error) error {
	if kind == ErrBudgetExhausted && cause != nil && !c.is(episode) {
		// The caller gave up before anything failed: the plain context
		// error, as pgxpool would return it.
		c.finish(cause)
		return cause
	}
	ev := c.events()
	fe := &FailoverError{Kind: kind, Cause: cause, Attempts: ev.attempts, Hosts: ev.outcomes}
	// Hosts the call never tried (it waited while they were down or in the
	// wrong role) are listed with what the Pool knew of them.
	s := c.e.State.Routes().Health
	for i := range s.Len() {
		h := s.Host(i)
		if slices.ContainsFunc(fe.Hosts, func(o HostError) bool { return o.Addr == h.Addr }) {
			continue
		}
		var why error = &hosthealth.RoleError{Addr: h.Addr, Role: h.Role, Target: c.picker.target}
		if st := s.State(i, c.picker.target); st != hosthealth.TopologyReject {
			why = &hostStateError{state: st}
			if c.picker.reads != nil && st <= hosthealth.Unknown && h.Role == hosthealth.RoleReplica {
				if lagErr := c.picker.reads.lagError(h.Addr); lagErr != nil {
					why = lagErr
				}
			}
		}
		fe.Hosts = append(fe.Hosts, HostError{Addr: h.Addr, Err: why})
	}
	c.finish(fe)
	return fe
}
