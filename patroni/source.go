package patroni

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/lograte"
	"github.com/pgfailover/pgfailover/topology"
)

// Defaults of SourceConfig.
const (
	DefaultRefreshInterval = 3 * time.Second
	DefaultZoneTag         = "zone"
)

// warnEvery is the least time between two warnings of one kind: an API
// that stays down, or an answer that keeps listing a bad member, is
// reported once a minute, with the count of what was left unsaid.
const warnEvery = time.Minute

// SourceConfig configures a Source. Only Client is required.
type SourceConfig struct {
	Client *Client
	// RefreshInterval is the time between two reads of GET /cluster; 0
	// means DefaultRefreshInterval.
	RefreshInterval time.Duration
	// ZoneTag names the Patroni tag that holds a member's zone; ""
	// means DefaultZoneTag.
	ZoneTag string
	// AllowList limits the members reported; the zero value allows all.
	AllowList AllowList
	// Logger receives warnings (API unreachable, members skipped), at most
	// one of each kind a minute, a line when the API answers again, and
	// one when hosts come or go; nil means silence.
	Logger *slog.Logger
	// MeterProvider receives pgfailover.patroni.hosts.discovered,
	// .removed and .topology.changes; nil means none.
	MeterProvider metric.MeterProvider
	// clock schedules the reads and rate-limits the warnings; nil means
	// the wall clock. A Pool sets it to its own (clock.Configure).
	clock clock.Clock
}

// Source reports the members of a Patroni cluster as a topology.Source.
type Source struct {
	client   *Client
	interval time.Duration
	zoneTag  string
	allow    AllowList
	log      *slog.Logger
	clock    clock.Clock
	tel      sourceTelemetry
	refresh  chan struct{} // holds one pending Refresh at most
	watching atomic.Bool
}

// NewSource checks cfg and returns a Source. It does no I/O.
func NewSource(cfg SourceConfig) (*Source, error) {
	if cfg.Client == nil {
		return nil, errors.New("patroni: SourceConfig.Client is nil")
	}
	if cfg.RefreshInterval < 0 {
		return nil, errors.New("patroni: RefreshInterval must not be negative")
	}
	s := &Source{
		client:   cfg.Client,
		interval: cmpOr(cfg.RefreshInterval, DefaultRefreshInterval),
		zoneTag:  cmpOr(cfg.ZoneTag, DefaultZoneTag),
		allow:    cfg.AllowList,
		log:      cfg.Logger,
		clock:    cfg.clock,
		refresh:  make(chan struct{}, 1),
	}
	if s.clock == nil {
		s.clock = clock.Real()
	}
	tel, err := newSourceTelemetry(cfg.MeterProvider)
	if err != nil {
		return nil, err
	}
	s.tel = tel
	return s, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Refresh asks a running Watch to read GET /cluster now rather than at the
// next interval. It never blocks; calls made while a read is pending are
// folded into it. It may be called from any goroutine, at any time: a call
// made while no Watch runs is spent by the next Watch, whose first read
// happens at once anyway.
func (s *Source) Refresh() {
	select {
	case s.refresh <- struct{}{}:
	default:
	}
}

// Watch reads GET /cluster at once, then every RefreshInterval and after
// each Refresh, until ctx ends, and calls update with the complete member
// list after the first good answer and after each answer that changes it.
// While the API cannot be reached it reports nothing, so the last topology
// stays in force; an answer none of whose members is allowed counts as
// no answer, for the same reason. Watch returns nil once ctx ends, leaving
// no goroutine behind, or ErrWatching at once when another Watch of s is
// running.
//
// The Client's idle keep-alive connections belong to the Client: close
// them with Client.CloseIdleConnections when done with it.
func (s *Source) Watch(ctx context.Context, update func(topology.Topology)) error {
	if !s.watching.CompareAndSwap(false, true) {
		return ErrWatching
	}
	defer s.watching.Store(false)
	// The first read happens now anyway: a Refresh from before is spent.
	select {
	case <-s.refresh:
	default:
	}
	w := &watch{Source: s, update: update, warnings: lograte.New(warnEvery, s.clock)}
	for {
		w.poll(ctx)
		t := s.clock.NewTimer(s.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		case <-s.refresh:
			t.Stop()
		}
	}
}

// watch is the state of one Watch call; only its goroutine touches it.
type watch struct {
	*Source
	update   func(topology.Topology)
	last     []topology.Member
	reported bool
	leader   string // the address of the leader last named, "" before one was
	// warnings lets one warning of each kind (warnDown, warnSkipped)
	// through each warnEvery.
	warnings *lograte.Limiter
	// failedReads counts the reads in a row that found the API down.
	failedReads int
}

// The kinds of warning a watch rate-limits.
const (
	warnDown    = "down"    // the API cannot be reached
	warnSkipped = "skipped" // members left out of an answer
)

// poll reads the cluster once and reports it if it changed.
func (w *watch) poll(ctx context.Context) {
	cl, err := w.client.Cluster(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down, not the API failing
		}
		w.unreachable(ctx, err)
		return
	}
	w.reachable(ctx)
	members := w.members(ctx, cl)
	if len(members) == 0 {
		return // an empty topology would drop every host: keep the last
	}
	if w.reported && slices.EqualFunc(members, w.last, sameMember) {
		return
	}
	w.count(ctx, members)
	w.last, w.reported = members, true
	w.update(topology.Topology{Members: slices.Clone(members)})
}

// members turns an answer into the topology to report: allowed members
// only, best-ranked first, one per address.
func (w *watch) members(ctx context.Context, cl *Cluster) []topology.Member {
	var notes []string
	for _, is := range cl.Issues {
		notes = append(notes, is.String())
	}
	sorted := slices.Clone(cl.Members)
	slices.SortStableFunc(sorted, func(a, b Member) int { return a.rank() - b.rank() })
	out := make([]topology.Member, 0, len(sorted))
	seen := make(map[string]bool, len(sorted))
	for _, m := range sorted {
		addr := m.Addr()
		switch {
		case !w.allow.Allows(m.Host):
			notes = append(notes, "member "+clip(m.Name)+" at "+clip(addr)+" skipped: not in the allow-list")
		case seen[addr]:
			notes = append(notes, "member "+clip(m.Name)+" skipped: its address "+clip(addr)+" is taken by a member ranked before it")
		default:
			seen[addr] = true
			out = append(out, m.Topology(w.zoneTag))
		}
	}
	if len(notes) > 0 {
		msg := "patroni: members of /cluster left out or partly read"
		if len(out) == 0 {
			msg = "patroni: no member of /cluster can be used; keeping the last topology"
		}
		if ok, suppressed := w.warnings.Allow(warnSkipped); ok {
			w.logAttrs(ctx, slog.LevelWarn, msg,
				slog.String("issues", strings.Join(firstN(notes, 5), "; ")),
				slog.Int("count", len(notes)),
				slog.Int("suppressed", suppressed))
		}
	}
	return out
}

func firstN(s []string, n int) []string { return s[:min(n, len(s))] }

// count feeds the discovered, removed and topology change counters and
// logs the hosts that came and went. A change of members is another set of
// addresses than the last report's; a change of leader is an answer that
// names another leader than the last one named, so an answer that names
// none in between (Patroni's leader key is free during a failover) counts
// no change, and the one that then names the new leader counts one.
func (w *watch) count(ctx context.Context, members []topology.Member) {
	added := addrsNotIn(members, w.last)
	removed := addrsNotIn(w.last, members)
	if len(added) > 0 {
		w.tel.discovered.Add(ctx, int64(len(added)))
	}
	if len(removed) > 0 {
		w.tel.removed.Add(ctx, int64(len(removed)))
	}
	if w.reported && len(added)+len(removed) > 0 {
		w.tel.changes.Add(ctx, 1, changeMembers)
	}
	if leader := leaderOf(members); leader != "" {
		if w.leader != "" && leader != w.leader {
			w.tel.changes.Add(ctx, 1, changeLeader)
		}
		w.leader = leader
	}
	if len(added)+len(removed) > 0 {
		w.logAttrs(ctx, slog.LevelInfo, "patroni: hosts changed",
			slog.Any("added", added), slog.Any("removed", removed))
	}
}

// leaderOf returns the address of the member Patroni names its leader, ""
// when it names none. It goes by Patroni's role, not by the role claimed:
// a leader whose PostgreSQL is down is still the one holding the lock.
func leaderOf(members []topology.Member) string {
	for _, m := range members {
		if m.Tags[TagRole] == RoleLeader.String() {
			return m.Addr()
		}
	}
	return ""
}

// addrsNotIn returns the addresses of the members of a that are not in b.
func addrsNotIn(a, b []topology.Member) []string {
	in := make(map[string]bool, len(b))
	for _, m := range b {
		in[m.Addr()] = true
	}
	var out []string
	for _, m := range a {
		if !in[m.Addr()] {
			out = append(out, m.Addr())
		}
	}
	return out
}

func (w *watch) unreachable(ctx context.Context, err error) {
	w.failedReads++
	if ok, suppressed := w.warnings.Allow(warnDown); ok {
		w.logAttrs(ctx, slog.LevelWarn, "patroni: cannot read /cluster; keeping the last topology",
			slog.String("error", err.Error()),
			slog.Int("suppressed", suppressed))
	}
}

// reachable ends a run of failed reads: it says so once, and the next
// time the API cannot be reached is warned of at once.
func (w *watch) reachable(ctx context.Context) {
	if w.failedReads == 0 {
		return
	}
	w.logAttrs(ctx, slog.LevelInfo, "patroni: /cluster answers again",
		slog.Int("failed_reads", w.failedReads))
	w.failedReads = 0
	w.warnings.Forget(warnDown)
}

func (w *watch) logAttrs(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if w.log != nil {
		w.log.LogAttrs(ctx, level, msg, attrs...)
	}
}

// sameMember compares two members field by field, tags included.
func sameMember(a, b topology.Member) bool {
	return a.Host == b.Host && a.Port == b.Port && a.Zone == b.Zone && a.Role == b.Role &&
		a.NoLoadBalance == b.NoLoadBalance && maps.Equal(a.Tags, b.Tags)
}
