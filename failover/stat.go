package failover

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// Stat is a snapshot of the Pool: the totals of every host's pgxpool, with
// the methods of *pgxpool.Stat, and each host's own figures and health.
// The totals count the Pool's own connections; the Reader's are in each
// HostStat's Reads. Every total is a sum over the hosts, MaxConns too:
// pool_max_conns=4 over two hosts gives MaxConns 8, where a pgxpool over
// one server reads 4.
// It has every method of *pgxpool.Stat, so a collector written against
// PoolStat takes it as it is; see PoolStat for collectors that need the
// concrete *pgxpool.Stat. PgxPool's connections are not counted here.
type Stat struct {
	hosts []HostStat
}

// HostStat is one host's health and pool statistics.
type HostStat struct {
	hosthealth.HostStatus
	Tier hosthealth.Tier // the host's zone tier for the Pool's target
	// Probes is the number of health probes sent to the host so far. While
	// calls wait for a usable host, a reachable host is probed from 2ms
	// up to health_probe_wait_max apart, and a replica that a promotion
	// would make usable is watched instead, a probe each 200ms that the
	// server answers early once promoted; this shows what that cost.
	Probes int64
	// ProbeConn says whether the probe holds a connection of its own on
	// the host, beside Pool's and Reads': it asks on an idle one of
	// theirs when there is one, and holds none on a host the Pool does
	// not use (a replica under the primary target before the Reader has
	// read), between its probes ten health_probe_interval apart (10 s by
	// default).
	ProbeConn bool
	Pool      *pgxpool.Stat
	// Reads is the host's pool of the Reader's read-only sessions.
	Reads *pgxpool.Stat
	// Staleness is the upper bound on how stale the host is as a replica:
	// the age of the newest sample of the primary's WAL position it has
	// replayed. StalenessKnown is false for a primary, and for a replica
	// never probed, whose last probe failed, or that has replayed nothing.
	Staleness      time.Duration
	StalenessKnown bool
}

// Stat returns a snapshot of every host's health and pool.
func (p *Pool) Stat() *Stat {
	rs := p.eng.State.Routes()
	now := p.eng.Clock.Now()
	s := &Stat{hosts: make([]HostStat, 0, len(rs.Table.List))}
	// The routes' hosts are in the table's order: the connection string's
	// first, then the source's.
	for i, hr := range rs.Hosts {
		h := hr.Entry
		if h == nil {
			continue // its pool could not be built: not in the table
		}
		st := rs.Health.Host(i)
		st.State = rs.Health.State(i, p.cfg.Target)
		hs := HostStat{HostStatus: st, Tier: hr.Tier, Probes: h.Probes.Load(), ProbeConn: h.Probe.Holds(), Pool: h.Calls.Stat(), Reads: h.Reads.Stat()}
		hs.Staleness, hs.StalenessKnown = hr.Fresh.Staleness(now)
		s.hosts = append(s.hosts, hs)
	}
	return s
}

// Hosts returns each host's figures: the connection string's hosts in
// their order, then those only the topology source named. A host's State
// is as the Pool's target sees it (TopologyReject for the wrong role).
func (s *Stat) Hosts() []HostStat { return s.hosts }

func (s *Stat) sum32(f func(*pgxpool.Stat) int32) int32 {
	var n int32
	for _, h := range s.hosts {
		n += f(h.Pool)
	}
	return n
}

func (s *Stat) sum64(f func(*pgxpool.Stat) int64) int64 {
	var n int64
	for _, h := range s.hosts {
		n += f(h.Pool)
	}
	return n
}

func (s *Stat) sumDuration(f func(*pgxpool.Stat) time.Duration) time.Duration {
	var n time.Duration
	for _, h := range s.hosts {
		n += f(h.Pool)
	}
	return n
}

// AcquireCount is the number of successful acquires over all hosts.
func (s *Stat) AcquireCount() int64 { return s.sum64((*pgxpool.Stat).AcquireCount) }

// AcquireDuration is the total time spent acquiring over all hosts.
func (s *Stat) AcquireDuration() time.Duration {
	return s.sumDuration((*pgxpool.Stat).AcquireDuration)
}

// AcquiredConns is the number of connections in use.
func (s *Stat) AcquiredConns() int32 { return s.sum32((*pgxpool.Stat).AcquiredConns) }

// CanceledAcquireCount is the number of acquires canceled by a context.
func (s *Stat) CanceledAcquireCount() int64 { return s.sum64((*pgxpool.Stat).CanceledAcquireCount) }

// ConstructingConns is the number of connections being established.
func (s *Stat) ConstructingConns() int32 { return s.sum32((*pgxpool.Stat).ConstructingConns) }

// EmptyAcquireCount is the number of acquires that had to wait for a
// connection.
func (s *Stat) EmptyAcquireCount() int64 { return s.sum64((*pgxpool.Stat).EmptyAcquireCount) }

// EmptyAcquireWaitTime is the total time acquires waited for a connection.
func (s *Stat) EmptyAcquireWaitTime() time.Duration {
	return s.sumDuration((*pgxpool.Stat).EmptyAcquireWaitTime)
}

// IdleConns is the number of idle connections.
func (s *Stat) IdleConns() int32 { return s.sum32((*pgxpool.Stat).IdleConns) }

// MaxConns is the sum of every host's pool_max_conns.
func (s *Stat) MaxConns() int32 { return s.sum32((*pgxpool.Stat).MaxConns) }

// TotalConns is the number of open connections.
func (s *Stat) TotalConns() int32 { return s.sum32((*pgxpool.Stat).TotalConns) }

// NewConnsCount is the number of connections opened.
func (s *Stat) NewConnsCount() int64 { return s.sum64((*pgxpool.Stat).NewConnsCount) }

// MaxLifetimeDestroyCount is the number of connections closed for reaching
// pool_max_conn_lifetime.
func (s *Stat) MaxLifetimeDestroyCount() int64 {
	return s.sum64((*pgxpool.Stat).MaxLifetimeDestroyCount)
}

// MaxIdleDestroyCount is the number of connections closed for idling past
// pool_max_conn_idle_time.
func (s *Stat) MaxIdleDestroyCount() int64 { return s.sum64((*pgxpool.Stat).MaxIdleDestroyCount) }

// PoolStat is the method set of *pgxpool.Stat. Both *pgxpool.Stat and
// *Stat have it, so a metrics collector written against PoolStat reports
// the Pool's totals (every host's pool summed) and a plain pgxpool's alike:
//
//	func record(s failover.PoolStat) { gauge.Set(float64(s.AcquiredConns())) }
//	record(pool.Stat())           // the Pool's totals
//	record(pool.PgxPool().Stat()) // the primary-following pgxpool
//
// pgxpool's Stat has unexported fields, so no value of the concrete type
// can hold sums. Collectors that take a *pgxpool.Pool or a
// Stat() *pgxpool.Stat (otelpgx.RecordStats, pgxpoolprometheus) report
// PgxPool's pool, or one host's pool through Stat().Hosts()[i].Pool.
type PoolStat interface {
	AcquireCount() int64
	AcquireDuration() time.Duration
	AcquiredConns() int32
	CanceledAcquireCount() int64
	ConstructingConns() int32
	EmptyAcquireCount() int64
	EmptyAcquireWaitTime() time.Duration
	IdleConns() int32
	MaxConns() int32
	TotalConns() int32
	NewConnsCount() int64
	MaxLifetimeDestroyCount() int64
	MaxIdleDestroyCount() int64
}

var (
	_ PoolStat = (*pgxpool.Stat)(nil)
	_ PoolStat = (*Stat)(nil)
)
