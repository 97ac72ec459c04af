package failover

import (
	"context"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"log/slog"
	"time"
)

// warnEvery is how often at most one host's warnings of one kind are
// logged: during an outage every call's episode would otherwise log one.
// The next line that passes says how many were held back.
const warnEvery = 10 * time.Second

// What Config.Logger receives (nothing on a call that meets no failover
// event):
//   - Info "pgfailover: host changed", once per change of a host's state or
//     role, whoever noticed it (a probe, a call, a topology source), and
//     "host added" / "host removed" when the topology changes;
//   - Info "pgfailover: failover ended" when the Pool's target, left
//     without a usable host, has one again, with how long that took;
//   - Warn "pgfailover: failover" for a call's failover episode, with its
//     outcome; Warn "pgfailover: probe failed" when a probe's failure
//     changed a host's state; Warn for a host that could not be added and
//     a topology source that stopped. Warnings are limited per host and
//     message to one each warnEvery, the next one carrying suppressed=N.

// logInfo logs msg at Info, if the Pool has a Logger.
func (p *Pool) logInfo(msg string, attrs ...slog.Attr) {
	if p.cfg.Logger != nil {
		p.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, msg, attrs...)
	}
}

// warnHost logs msg at Warn about host addr, within the rate limit.
func (p *Pool) warnHost(addr, msg string, attrs ...slog.Attr) {
	p.warn(addr, msg, append([]slog.Attr{slog.String("host", addr)}, attrs...)...)
}

// warn logs msg at Warn, at most once each warnEvery for key and msg.
func (p *Pool) warn(key, msg string, attrs ...slog.Attr) {
	if p.cfg.Logger == nil {
		return
	}
	ok, suppressed := p.warnings.Allow(key + "\x00" + msg)
	if !ok {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed", suppressed))
	}
	p.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
}

// logHostChange logs one host's change of state or role, or its arrival
// or departure.
func (p *Pool) logHostChange(ch hoststate.Change) {
	switch {
	case p.cfg.Logger == nil:
	case ch.Added:
		p.logInfo("pgfailover: host added", slog.String("host", ch.After.Addr), slog.String("role", ch.After.Claimed.String()))
	case ch.Removed:
		p.logInfo("pgfailover: host removed", slog.String("host", ch.Before.Addr))
	default:
		p.logInfo("pgfailover: host changed",
			slog.String("host", ch.After.Addr),
			slog.String("state", ch.After.State.String()),
			slog.String("was", ch.Before.State.String()),
			slog.String("role", ch.After.Role.String()),
			slog.String("role_was", ch.Before.Role.String()),
		)
	}
}

// logOutageEnded logs the end of a time without a usable host.
func (p *Pool) logOutageEnded(o *hoststate.Outage[hostPool], d time.Duration) {
	attrs := []slog.Attr{slog.String("failed", o.Host.addr), slog.Duration("duration", d)}
	if rs := p.state.Routes(); len(rs.Ranked[p.cfg.Target]) > 0 {
		attrs = append(attrs, slog.String("host", rs.Ranked[p.cfg.Target][0].addr))
	}
	p.logInfo("pgfailover: failover ended", attrs...)
}

// logEpisode logs a call's failover episode at Warn, with its outcome,
// limited per host that failed first.
func (p *Pool) logEpisode(c *call, err error) {
	if p.cfg.Logger == nil {
		return
	}
	first := ""
	if len(c.ev.outcomes) > 0 {
		first = c.ev.outcomes[0].Addr
	} else if c.host != nil {
		first = c.host.addr
	}
	attrs := []slog.Attr{
		slog.String("outcome", callOutcome(err)),
		slog.Int("attempts", int(c.tries)),
		slog.Duration("waited", c.ev.waited),
	}
	if c.host != nil {
		attrs = append(attrs, slog.String("last_host", c.host.addr))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	p.warnHost(first, "pgfailover: failover", attrs...)
}
