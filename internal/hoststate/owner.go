package hoststate

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/replica"
)

// historySize is how many primary samples the lag book keeps, and
// sampleSpacing the least time between two kept samples whose positions
// differ. While calls wait for a host every server may be probed every few
// milliseconds; the spacing keeps the history covering at least
// historySize*sampleSpacing (about 13 s) even then, and the whole probe
// interval times historySize otherwise.
const (
	historySize   = 256
	sampleSpacing = 50 * time.Millisecond
)

// Options configure an Owner.
type Options struct {
	Target hosthealth.Target // the Pool's target
	Zone   string            // the client's zone; "" means unset
	Clock  clock.Clock       // the Pool's clock; nil means the wall clock
}

// Owner owns the host state of one Pool: health, freshness, epochs, the
// host table and the downtime under way. It is safe for concurrent use.
type Owner[T any] struct {
	target hosthealth.Target
	zone   string
	clock  clock.Clock

	// mu serializes every write: Observe and SetTable. No I/O while held.
	mu   sync.Mutex
	lag  *replica.Book // the replicas' freshness; guarded by mu
	down *Downtime[T]  // while the target has no usable host; guarded by mu
	// samples is the primary's newest WAL position for the Reader's pins,
	// and the one request for it in flight. Samples are kept under mu,
	// from observations the Owner took and AnswerSample; NeedSample
	// reads it, and names the request in flight, under the Sampler's own
	// lock only.
	samples replica.Sampler
	// cur is the published Routes. Readers load it without locking.
	cur atomic.Pointer[Routes[T]]
}

// New returns the Owner of a Pool that has no hosts yet.
func New[T any](opts Options) *Owner[T] {
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	o := &Owner[T]{target: opts.Target, zone: opts.Zone, clock: opts.Clock, lag: replica.NewBook(historySize, sampleSpacing)}
	health := hosthealth.New(nil, hosthealth.Options{Zone: opts.Zone, Clock: opts.Clock})
	rs := build(health, &Table[T]{}, nil, opts.Target, opts.Zone)
	rs.Moved, rs.Changed = make(chan struct{}), make(chan struct{})
	o.cur.Store(rs)
	return o
}

// Routes returns the current routing value. It never blocks.
func (o *Owner[T]) Routes() *Routes[T] { return o.cur.Load() }

// Epoch returns the epoch of the host at addr: the failover events
// recorded on it so far. An observation of the host takes it when it
// begins.
func (o *Owner[T]) Epoch(addr string) Epoch {
	if e := o.cur.Load().epochs[addr]; e != nil {
		return Epoch(e.Load())
	}
	return 0
}

// Counter returns the epoch counter of the host at addr, nil when addr is
// not in the host set: the caller reads it (Epoch, with no lookup), and
// the Owner alone adds to it. A host keeps its counter for as long as its
// address stays in the set.
func (o *Owner[T]) Counter(addr string) *atomic.Uint32 { return o.cur.Load().epochs[addr] }

// Epoch counts the failover events recorded on one host. It wraps after
// 2³² of them; observations compare epochs for equality only.
type Epoch uint32

// Stale reports whether an observation of the host at addr that began at
// epoch since is older than the host's latest failure.
func (o *Owner[T]) Stale(addr string, since Epoch) bool { return o.Epoch(addr) != since }

// Kind says what an Observation reports.
type Kind uint8

const (
	// Failed: a failover event of Class on the host, met by a call, a
	// dial or a login. A Topology failure (a write refused by a read-only
	// server) says the server answered in the replica role.
	Failed Kind = iota + 1
	// Answered: the server stated its Role (a login, a connection that
	// reports a new role).
	Answered
	// Probed: a probe's outcome, answer or failure (Probe).
	Probed
	// Replayed: a replica was seen, on one of its connections, to have
	// replayed at least LSN.
	Replayed
	// Looked: a look at a replica on one of its connections (Report).
	Looked
	// Sampled: the primary's WAL position, Sample, asked on one of its
	// connections after a write. A read pinned by a write reports the
	// sample it asked for with AnswerSample instead.
	Sampled
)

// Observation is one thing learnt about the host at Addr.
type Observation struct {
	Kind Kind
	Addr string
	// Since is the host's epoch when what is observed began: the dial,
	// login, statement or probe (Epoch). A Failed, Answered, Probed or
	// Sampled observation that began before the host's latest failure is
	// older news than that failure, and is dropped.
	Since Epoch
	Class hosthealth.Class // Failed
	Role  hosthealth.Role  // Answered
	Probe probe.Result     // Probed
	LSN   replica.LSN      // Replayed
	// Report is what a look found (Looked).
	Report replica.Report
	// Sample is the primary's position (Sampled).
	Sample replica.Sample
	// Server is the server the connection of a Replayed or Looked
	// observation reached, "" when not known. Behind a name that leads to
	// several servers, what one of them holds says nothing of another:
	// the observation is dropped when both it and the server the host's
	// freshness describes (HostStatus.Server) are known and differ.
	Server string
}

// Result is what an observation changed.
type Result[T any] struct {
	// Dropped is set when the observation was older than the host's
	// latest failure, about a host not in the set, or (Replayed, Looked)
	// made on another server than the one the host's freshness
	// describes: nothing was applied.
	Dropped bool
	// Before and After are the host's status around the observation.
	Before, After hosthealth.HostStatus
	// Demoted is set when the server stated a role the target does not
	// accept, and the host was not known in that role: its connections
	// for the target should go.
	Demoted bool
	News[T]
}

// News is what one publication of the Routes changed in the hosts'
// health, for the caller to log and record. Only a publication that
// changes the rankings (a host's health, or a new table that ranks other
// hosts) has News, and Changes holds health changes only; one of
// freshness alone has none.
type News[T any] struct {
	Changes []Change
	// Ended is set when the target had no usable host and has one
	// again: a failover, or a recovery, ended.
	Ended *Downtime[T]
	At    time.Time // when the Routes were published, on the Owner's clock
}

// Change is one host's status before and after a publication: its state,
// its role, or the server its name leads to (once one was known) changed.
// A host added has Added set; one removed, Removed.
type Change struct {
	Before, After  hosthealth.HostStatus
	Added, Removed bool
}

// Downtime is a time during which the target had no usable host: it
// starts when the last usable host fails, and ends when a host is usable
// again.
type Downtime[T any] struct {
	Host  *T // the host the calls were using when it began
	Since time.Time
}

// Observe applies one observation and publishes what it changed.
func (o *Owner[T]) Observe(ob Observation) Result[T] {
	o.mu.Lock()
	defer o.mu.Unlock()
	old := o.cur.Load()
	var res Result[T]
	epoch := old.epochs[ob.Addr]
	st, ok := old.Status(ob.Addr)
	if !ok || epoch == nil {
		res.Dropped = true
		return res
	}
	res.Before = st
	drop := func() Result[T] {
		res.Dropped, res.After = true, st
		return res
	}
	health, lagChanged := old.Health, false
	answered := func(role hosthealth.Role, since Epoch) bool {
		if Epoch(epoch.Load()) != since {
			return false
		}
		health = health.ObserveConnect(ob.Addr, role)
		res.Demoted = role != st.Role && !o.target.Accepts(role)
		return true
	}
	failed := func(c hosthealth.Class) {
		epoch.Add(1)
		health = health.ObserveFailure(ob.Addr, c)
	}
	switch ob.Kind {
	case Failed:
		if Epoch(epoch.Load()) != ob.Since {
			// Another failure of the host was recorded since this one's
			// attempt began: the same event, met again, or one older
			// than a newer answer's news.
			return drop()
		}
		switch ob.Class {
		case hosthealth.Topology:
			answered(hosthealth.RoleReplica, ob.Since)
		case hosthealth.NotFailover:
		default:
			failed(ob.Class)
		}
	case Answered:
		res.Dropped = !answered(ob.Role, ob.Since)
	case Probed:
		r := ob.Probe
		if Epoch(epoch.Load()) != ob.Since {
			return drop() // an answer or a silence older than the latest failure
		}
		if r.Err != nil {
			if c := hosthealth.Classify(r.Err); c != hosthealth.NotFailover {
				failed(c)
			}
			lagChanged = o.lag.Unknown(ob.Addr) // unknown until a probe says otherwise
			break
		}
		answered(r.Role, ob.Since)
		health = health.ObserveZone(ob.Addr, r.Zone).ObserveServer(ob.Addr, r.Server)
		switch r.Role {
		case hosthealth.RoleUnknown:
			lagChanged = o.lag.Unknown(ob.Addr)
		case hosthealth.RolePrimary:
			if st.Server != "" && r.Server != "" && st.Server != r.Server {
				// Another server behind the same name: the old one's
				// positions say nothing of this one's.
				o.lag.Forget(ob.Addr)
			}
			// Kept before the Routes that may make the host the primary
			// are published, so a pinned read finds it there.
			o.samples.Observe(ob.Addr, replica.Sample{LSN: r.WAL, At: r.Asked})
			lagChanged = o.lag.Primary(ob.Addr, r.WAL, r.Asked, r.Sync)
		default:
			lagChanged = o.lag.Replica(ob.Addr, replica.Report{At: r.Asked, Replayed: r.WAL, Received: r.Received, Receiving: r.Receiving})
		}
	case Sampled:
		if Epoch(epoch.Load()) != ob.Since {
			return drop()
		}
		o.samples.Observe(ob.Addr, ob.Sample)
		res.After = st
		return res
	case Replayed, Looked:
		if ob.Server != "" && st.Server != "" && ob.Server != st.Server {
			return drop()
		}
		if ob.Kind == Replayed {
			lagChanged = o.lag.Raise(ob.Addr, ob.LSN)
		} else {
			lagChanged = o.lag.Look(ob.Addr, ob.Report)
		}
	}
	res.News = o.publish(old, health, old.Table, old.epochs, lagChanged)
	res.After, _ = o.cur.Load().Status(ob.Addr)
	return res
}

// NeedSample is replica.Sampler.Need on the primary's samples: what a
// read pinned by a write that completed at wrote does to find a sample of
// the primary at addr taken after it. The one asked to (replica.Ask)
// reports with AnswerSample, whatever the outcome.
func (o *Owner[T]) NeedSample(addr string, wrote time.Time) (replica.Sample, replica.Step, <-chan struct{}) {
	return o.samples.Need(addr, wrote)
}

// AnswerSample ends the request for a sample in flight: ok says the
// primary at addr was asked, in its epoch since, and stood at s. The
// sample is kept as a Sampled observation is; the reads waiting go on
// either way.
func (o *Owner[T]) AnswerSample(addr string, since Epoch, s replica.Sample, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.samples.Answer(addr, s, ok && o.Epoch(addr) == since)
}

// Reached returns the time of the newest sample of the primary's WAL
// position at or before lsn: every write acknowledged before it is
// visible on a server that has replayed lsn. ok is false when no sample
// is that old.
func (o *Owner[T]) Reached(lsn replica.LSN) (at time.Time, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lag.Reached(lsn)
}

// SetTable makes table the host table and hosts the host set, in one
// publication: no Routes pairs a table with another set's health. A host
// that stays keeps its state and epoch; a new one starts Unknown; what the
// lag book knows of a host that left the table is dropped.
func (o *Owner[T]) SetTable(table *Table[T], hosts []hosthealth.HostSpec) News[T] {
	o.mu.Lock()
	defer o.mu.Unlock()
	old := o.cur.Load()
	health := old.Health.SetHosts(hosts)
	epochs := old.epochs
	if health != old.Health {
		epochs = make(map[string]*atomic.Uint32, health.Len())
		for i := range health.Len() {
			addr := health.Host(i).Addr
			if epochs[addr] = old.epochs[addr]; epochs[addr] == nil {
				epochs[addr] = new(atomic.Uint32)
			}
		}
	}
	forgot := false
	for addr := range old.Table.ByAddr {
		if table.ByAddr[addr] == nil {
			forgot = o.lag.Forget(addr) || forgot
		}
	}
	return o.publish(old, health, table, epochs, forgot)
}

// publish publishes new Routes when an input changed: health, table, or
// the lag book (lagChanged). mu is held.
func (o *Owner[T]) publish(old *Routes[T], health *hosthealth.Snapshot, table *Table[T], epochs map[string]*atomic.Uint32, lagChanged bool) News[T] {
	fresh, freshChanged := old.Fresh, false
	if lagChanged {
		if next := o.lag.Candidates(); !maps.Equal(next, fresh) {
			fresh, freshChanged = next, true
		}
	}
	healthChanged := health != old.Health
	var next *Routes[T]
	if !healthChanged && !freshChanged && table == old.Table {
		// What the replicas hold is derived only while no primary is
		// usable, the only time the Reader reads it.
		if !lagChanged || len(old.Ranked[hosthealth.TargetPrimary]) > 0 {
			return News[T]{} // nothing routing reads changed
		}
		n := *old
		next = &n
	} else {
		next = build(health, table, fresh, o.target, o.zone)
	}
	next.epochs = epochs
	next.Outage = nil
	if len(next.Ranked[hosthealth.TargetPrimary]) == 0 {
		next.Outage = old.Outage
		if lagChanged || healthChanged || old.Outage == nil {
			next.Outage = o.lag.Outage()
		}
	}
	// A new table with the same health can still change what a pick
	// finds: a host whose T could not be built before, or a host the
	// source now keeps reads off.
	rankedChanged := healthChanged || (table != old.Table && !sameRanked(old, next))
	readsChanged := rankedChanged || freshChanged || next.Outage != old.Outage ||
		(table != old.Table && (!slices.Equal(old.Replicas, next.Replicas) || !slices.Equal(old.Cands, next.Cands)))
	next.Moved, next.Changed = old.Moved, old.Changed
	if rankedChanged {
		next.Moved = make(chan struct{})
	}
	if readsChanged {
		next.Changed = make(chan struct{})
	}
	o.cur.Store(next)
	if rankedChanged {
		close(old.Moved)
	}
	if readsChanged {
		close(old.Changed)
	}
	if !rankedChanged {
		return News[T]{}
	}
	// A downtime starts and ends with the rankings, whichever input moved
	// them; the host changes are those of health alone.
	now := o.clock.Now()
	var changes []Change
	if healthChanged {
		changes = diff(old, next)
	}
	return News[T]{Changes: changes, Ended: o.trackDowntime(old, next, now), At: now}
}

// trackDowntime starts or ends the downtime after a publication from old
// to next. mu is held. It returns the downtime that ended, if one did.
func (o *Owner[T]) trackDowntime(old, next *Routes[T], now time.Time) *Downtime[T] {
	hadHost, hasHost := len(old.Ranked[o.target]) > 0, len(next.Ranked[o.target]) > 0
	switch {
	case hadHost && !hasHost && o.down == nil:
		// The host that failed: the one the calls were using.
		o.down = &Downtime[T]{Host: old.Ranked[o.target][0], Since: now}
	case hasHost && o.down != nil:
		ended := o.down
		o.down = nil
		return ended
	}
	return nil
}

// diff compares the health of two Routes. The first host table of an
// Owner reports no hosts added.
func diff[T any](old, next *Routes[T]) []Change {
	var out []Change
	first := len(old.Table.List) == 0
	for i := range next.Health.Len() {
		after := next.Health.Host(i)
		before, ok := old.Status(after.Addr)
		if !ok {
			if !first {
				out = append(out, Change{After: after, Added: true})
			}
			continue
		}
		if before.State != after.State || before.Role != after.Role || before.Server != "" && before.Server != after.Server {
			out = append(out, Change{Before: before, After: after})
		}
	}
	for i := range old.Health.Len() {
		before := old.Health.Host(i)
		if _, ok := next.Health.Lookup(before.Addr); !ok {
			out = append(out, Change{Before: before, Removed: true})
		}
	}
	return out
}

// sameRanked reports whether a and b rank the same hosts for every target.
func sameRanked[T any](a, b *Routes[T]) bool {
	for t := range a.Ranked {
		if !slices.Equal(a.Ranked[t], b.Ranked[t]) {
			return false
		}
	}
	return true
}
