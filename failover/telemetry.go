package failover

import (
	"github.com/pgfailover/pgfailover/internal/telemetry"
)

// The Pool's instruments and log lines are internal/telemetry's; the Pool
// says when something happened.

// observeHosts fills in what the Pool's observable instruments read at a
// collection: every host of the table whose pools were built, and the
// pools of PgxPool and the Reader's PgxPool.
func (p *Pool) observeHosts(ob *telemetry.Observation) {
	rs := p.eng.State.Routes()
	s := rs.Health
	now := p.eng.Clock.Now()
	ob.Hosts = make([]telemetry.HostView, 0, s.Len())
	for i := range s.Len() {
		hp := rs.Hosts[i].Entry
		if hp == nil {
			continue // its pool could not be built: not in the table
		}
		v := telemetry.HostView{Server: hp.Server, Addr: hp.Addr, State: s.State(i, p.cfg.Target), Role: s.Host(i).Role,
			Calls: hp.Calls.Stat(), Reads: hp.Reads.Stat()}
		v.Staleness, v.StalenessKnown = rs.Hosts[i].Fresh.Staleness(now)
		ob.Hosts = append(ob.Hosts, v)
	}
	if f := p.follower(); f != nil {
		ob.PgxPool = f.PgxPool.Stat()
	}
	if f := p.reader.follow.Load(); f != nil {
		ob.ReaderPgxPool = f.PgxPool.Stat()
	}
}
