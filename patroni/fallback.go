package patroni

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/backoff"
	"github.com/pgfailover/pgfailover/topology"
)

// Defaults of FallbackConfig.
const (
	DefaultFallbackCooldown     = 30 * time.Second
	DefaultFallbackConnect      = 5 * time.Second
	DefaultFallbackLifetime     = 30 * time.Second
	DefaultQueryWaitTimeout     = 5 * time.Second
	DefaultCandidateCooldown    = 5 * time.Second
	DefaultCandidateCooldownMax = 60 * time.Second
)

// FallbackConfig configures a Fallback. Zero durations take the defaults.
type FallbackConfig struct {
	// Local is the address (host:port) of the preferred server, usually
	// the one on the same machine. It is never a candidate: the members'
	// entry for it, if any, is left out of the waves.
	Local string
	// Cooldown is how long the local server is left alone after it fails,
	// and how long a fallback host, once found, is used without asking
	// again (fallback_cooldown).
	Cooldown time.Duration
	// ConnectTimeout bounds each candidate's connect
	// (fallback_connect_timeout).
	ConnectTimeout time.Duration
	// Lifetime is the longest a connection to a fallback host may live, so
	// that traffic comes back once the cluster settles (fallback_lifetime).
	Lifetime time.Duration
	// QueryWaitTimeout is the longest a caller waits for a fallback host
	// (query_wait_timeout).
	QueryWaitTimeout time.Duration
	// CandidateCooldown is about how long a candidate that failed is
	// skipped: it doubles with each failure in a row, up to
	// CandidateCooldownMax, and each cooldown is drawn between half of
	// that and all of it (see Fallback.CandidateFailed).
	CandidateCooldown    time.Duration
	CandidateCooldownMax time.Duration
}

// Reason says why a connect to a server failed.
type Reason uint8

const (
	// ReasonRefused: the connection was refused; nothing listens.
	ReasonRefused Reason = iota
	// ReasonSocket: the socket failed (reset, EOF, unreachable, TLS).
	ReasonSocket
	// ReasonTimeout: the connect did not finish in time.
	ReasonTimeout
	// ReasonStartup: the server answered but refused to serve yet
	// (starting up, shutting down, in recovery, too many clients).
	ReasonStartup
	// ReasonAuth: the server rejected the credentials. It is alive, so
	// this is no reason to leave the local server.
	ReasonAuth
)

var reasonNames = [...]string{
	ReasonRefused: "refused",
	ReasonSocket:  "socket",
	ReasonTimeout: "timeout",
	ReasonStartup: "startup",
	ReasonAuth:    "auth",
}

// String returns "refused", "socket", "timeout", "startup" or "auth".
func (r Reason) String() string { return enumName(reasonNames[:], int(r), "Reason") }

// FallsBack reports whether a failure of the local server for this reason
// sends new connections elsewhere: every reason but ReasonAuth, since a
// server that checks credentials is up, and another host would reject
// the same credentials anyway.
func (r Reason) FallsBack() bool { return r != ReasonAuth }

// Action is what a caller should do for a new connection.
type Action uint8

const (
	// UseLocal: connect to the local server.
	UseLocal Action = iota
	// UseFallback: connect to Decision.Addr, the fallback host in force.
	UseFallback
	// Discover: race the waves of Plan, drawn from the members last set
	// (SetMembers).
	Discover
)

var actionNames = [...]string{UseLocal: "use-local", UseFallback: "use-fallback", Discover: "discover"}

// String returns "use-local", "use-fallback" or "discover".
func (a Action) String() string { return enumName(actionNames[:], int(a), "Action") }

// Decision is where a new connection should go.
type Decision struct {
	Action Action
	// Addr is the host to connect to: the local server or the fallback
	// host; "" for Discover.
	Addr string
	// Lifetime caps the connection's life; 0 means no cap (the local
	// server).
	Lifetime time.Duration
}

// Wave is a set of candidates to connect to at once; the first to
// succeed wins.
type Wave []topology.Member

// Plan is one round of discovery: the waves in order, the later started
// only once every candidate of the earlier has failed.
type Plan struct {
	Waves []Wave
	// ConnectTimeout bounds each candidate's connect.
	ConnectTimeout time.Duration
	// Lifetime caps the life of the winner's connections.
	Lifetime time.Duration
	// Deadline is when the caller stops waiting, whatever is in flight.
	Deadline time.Time
}

// Timeout returns how long a connect started at now may take: the
// per-candidate bound, cut short by the caller's deadline.
func (p Plan) Timeout(now time.Time) time.Duration {
	return max(0, min(p.ConnectTimeout, p.Deadline.Sub(now)))
}

// Fallback decides where new connections go while the local server is
// down, in the manner of pg_doorman's Patroni fallback. It is pure logic:
// the caller connects, reports each outcome with the time it happened,
// and follows the decisions. It is safe for concurrent use.
//
// When the local server fails for a reason that FallsBack, it is left
// alone for Cooldown. Meanwhile Decide answers Discover until a candidate
// has Won; the winner then takes new connections, each living at most
// Lifetime, for Cooldown. If the winner fails, it is forgotten and
// CandidateFailed asks for one more round. Once the local server's
// cooldown is over, Decide sends connections to it again.
//
// Callers that are told to Discover at the same moment should share one
// round rather than each race the same candidates, as LocalFirst's callers
// do.
type Fallback struct {
	cfg  FallbackConfig
	rand backoff.Rand // draws each candidate's cooldown

	// mu guards the fields below. No I/O happens while it is held.
	mu             sync.Mutex
	members        []topology.Member
	localDownUntil time.Time
	localReason    Reason
	winner         string
	winnerUntil    time.Time
	cooling        map[string]Cooldown
}

// Cooldown is a failed candidate's time out.
type Cooldown struct {
	// Until is when the candidate may be tried again.
	Until time.Time
	// Reason is why it last failed.
	Reason Reason
	// Failures counts its failures in a row.
	Failures int
}

// NewFallback checks cfg and returns a Fallback with no members.
func NewFallback(cfg FallbackConfig) (*Fallback, error) {
	for _, d := range []*time.Duration{&cfg.Cooldown, &cfg.ConnectTimeout, &cfg.Lifetime,
		&cfg.QueryWaitTimeout, &cfg.CandidateCooldown, &cfg.CandidateCooldownMax} {
		if *d < 0 {
			return nil, errors.New("patroni: FallbackConfig durations must not be negative")
		}
	}
	cfg.Cooldown = cmpOr(cfg.Cooldown, DefaultFallbackCooldown)
	cfg.ConnectTimeout = cmpOr(cfg.ConnectTimeout, DefaultFallbackConnect)
	cfg.Lifetime = cmpOr(cfg.Lifetime, DefaultFallbackLifetime)
	cfg.QueryWaitTimeout = cmpOr(cfg.QueryWaitTimeout, DefaultQueryWaitTimeout)
	cfg.CandidateCooldown = cmpOr(cfg.CandidateCooldown, DefaultCandidateCooldown)
	cfg.CandidateCooldownMax = cmpOr(cfg.CandidateCooldownMax, DefaultCandidateCooldownMax)
	if cfg.CandidateCooldownMax < cfg.CandidateCooldown {
		return nil, errors.New("patroni: CandidateCooldownMax is shorter than CandidateCooldown")
	}
	return &Fallback{cfg: cfg, rand: rand.Int64N, cooling: make(map[string]Cooldown)}, nil
}

// SetMembers replaces the members the candidates are drawn from, as a
// Source last reported them.
func (f *Fallback) SetMembers(members []topology.Member) {
	members = slices.Clone(members)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members = members
}

// Decide says where a new connection made at now should go.
func (f *Fallback) Decide(now time.Time) Decision {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !now.Before(f.localDownUntil):
		return Decision{Action: UseLocal, Addr: f.cfg.Local}
	case f.winner != "" && now.Before(f.winnerUntil):
		return Decision{Action: UseFallback, Addr: f.winner, Lifetime: f.cfg.Lifetime}
	default:
		return Decision{Action: Discover}
	}
}

// Active returns the fallback host in force at now: a winner, while the
// local server is in its cooldown and the winner is still cached.
func (f *Fallback) Active(now time.Time) (addr string, ok bool) {
	d := f.Decide(now)
	if d.Action != UseFallback {
		return "", false
	}
	return d.Addr, true
}

// LocalFailed records that the local server failed at now. It reports
// whether connections now fall back: not for ReasonAuth, which leaves
// everything as it was.
func (f *Fallback) LocalFailed(now time.Time, reason Reason) bool {
	if !reason.FallsBack() {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.localDownUntil = now.Add(f.cfg.Cooldown)
	f.localReason = reason
	return true
}

// Plan returns the round of discovery to run at now. Wave 1 holds every
// live synchronous standby (sync_standby, and quorum_standby, its
// counterpart in quorum-commit clusters): the members Patroni promotes
// first, so writes may soon work there. Wave 2 holds the rest, the leader
// and asynchronous replicas first, then a standby leader and members
// whose role is unknown. The local server and candidates in their
// cooldown are left out; empty waves are dropped.
func (f *Fallback) Plan(now time.Time) Plan {
	f.mu.Lock()
	defer f.mu.Unlock()
	var first, rest Wave
	for _, m := range f.members {
		addr := m.Addr()
		if addr == f.cfg.Local || f.coolingAt(addr, now) {
			continue
		}
		if fallbackRank(m) == 0 {
			first = append(first, m)
		} else {
			rest = append(rest, m)
		}
	}
	slices.SortStableFunc(rest, func(a, b topology.Member) int { return fallbackRank(a) - fallbackRank(b) })
	p := Plan{ConnectTimeout: f.cfg.ConnectTimeout, Lifetime: f.cfg.Lifetime, Deadline: now.Add(f.cfg.QueryWaitTimeout)}
	for _, w := range []Wave{first, rest} {
		if len(w) > 0 {
			p.Waves = append(p.Waves, w)
		}
	}
	return p
}

// fallbackRank orders candidates: 0 for wave 1; within wave 2, 1 for the
// leader and replicas, 2 for a standby leader, 3 for the rest.
func fallbackRank(m topology.Member) int {
	if m.Role == hosthealth.RoleUnknown {
		return 3 // no live role: tried last
	}
	switch ParseRole(m.Tags[TagRole]) {
	case RoleSyncStandby, RoleQuorumStandby:
		return 0
	case RoleLeader, RoleReplica:
		return 1
	case RoleStandbyLeader:
		return 2
	}
	return 3
}

// coolingAt reports whether addr is in its cooldown at now. f.mu is held.
func (f *Fallback) coolingAt(addr string, now time.Time) bool {
	c, ok := f.cooling[addr]
	return ok && now.Before(c.Until)
}

// CandidateFailed records that a candidate failed at now; it is skipped
// for a cooldown whatever the reason (the reason is kept for State). The
// cooldown's base is CandidateCooldown, doubled for each failure in a row,
// at most CandidateCooldownMax; the cooldown is drawn between half of the
// base and all of it, so that the Pools of many instances that saw the
// same candidate fail do not all try it again at the same moment. The
// streak is forgotten once the candidate has been left alone for
// CandidateCooldownMax after its last cooldown ended.
//
// When addr is the fallback host in force, it is forgotten, and
// CandidateFailed returns true: the caller runs one more round of
// discovery.
func (f *Fallback) CandidateFailed(addr string, now time.Time, reason Reason) (retry bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.cooling[addr]
	if now.Sub(c.Until) > f.cfg.CandidateCooldownMax {
		c.Failures = 0
	}
	c.Failures++
	curve := backoff.Exponential{Initial: f.cfg.CandidateCooldown, Max: f.cfg.CandidateCooldownMax}
	c.Until = now.Add(backoff.DrawEqual(curve.Base(c.Failures), f.rand))
	c.Reason = reason
	f.cooling[addr] = c
	f.forgetExpired(now)
	if addr == f.winner {
		f.winner, f.winnerUntil = "", time.Time{}
		return true
	}
	return false
}

// forgetExpired drops the cooldowns whose streak would be forgotten
// anyway, so the map stays as small as the set of recent failures. f.mu
// is held.
func (f *Fallback) forgetExpired(now time.Time) {
	for addr, c := range f.cooling {
		if now.Sub(c.Until) > f.cfg.CandidateCooldownMax {
			delete(f.cooling, addr)
		}
	}
}

// Won records that the candidate at addr connected first at now: it takes
// new connections for Cooldown, and its failure streak ends. It returns
// the fallback host it replaces ("" when none, or when it is addr), so a
// caller that keeps a per-host gauge can remove the old series in the
// same step as it sets the new one.
func (f *Fallback) Won(addr string, now time.Time) (previous string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.winner != addr && f.winner != "" && now.Before(f.winnerUntil) {
		previous = f.winner
	}
	f.winner, f.winnerUntil = addr, now.Add(f.cfg.Cooldown)
	delete(f.cooling, addr)
	return previous
}

// FallbackState is a Fallback's state at one moment, for metrics and
// logs.
type FallbackState struct {
	// LocalDown is true while the local server is in its cooldown, which
	// ends at LocalRetry; LocalReason is why it began.
	LocalDown   bool
	LocalRetry  time.Time
	LocalReason Reason
	// Active is the fallback host in force, "" when none, until
	// ActiveUntil.
	Active      string
	ActiveUntil time.Time
	// Cooling holds the candidates in their cooldown, by address.
	Cooling map[string]Cooldown
}

// State returns the state at now.
func (f *Fallback) State(now time.Time) FallbackState {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := FallbackState{Cooling: make(map[string]Cooldown)}
	if now.Before(f.localDownUntil) {
		s.LocalDown, s.LocalRetry, s.LocalReason = true, f.localDownUntil, f.localReason
		if f.winner != "" && now.Before(f.winnerUntil) {
			s.Active, s.ActiveUntil = f.winner, f.winnerUntil
		}
	}
	for addr, c := range f.cooling {
		if now.Before(c.Until) {
			s.Cooling[addr] = c
		}
	}
	return s
}
