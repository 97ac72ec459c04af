package telemetry

import (
	"context"
	"log/slog"
	"time"

	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/internal/lograte"
)

// warnEvery is how often at most one host's warnings of one kind are
// logged: during an outage every call's episode would otherwise log one.
// The next line that passes says how many were held back.
const warnEvery = 10 * time.Second

// Logger writes a Pool's log lines to its *slog.Logger (Config.Logger).
// The zero Logger, and one made without a *slog.Logger, log nothing.
//
// What the *slog.Logger receives (nothing on a call that meets no
// failover event):
//   - Info "pgfailover: host changed", once per change of a host's state or
//     role, whoever noticed it (a probe, a call, a topology source), and
//     "host added" / "host removed" when the topology changes
//     ([Logger.HostChange]);
//   - Info "pgfailover: failover ended" when the Pool's target, left
//     without a usable host, has one again, with how long that took
//     ([Logger.FailoverEnded]);
//   - Warn "pgfailover: failover" for a call's failover episode, with its
//     outcome ([Logger.Episode]); Warn "pgfailover: probe failed" when a
//     probe's failure changed a host's state; Warn for a host that could
//     not be added and a topology source that stopped. Warnings are
//     limited per host and message to one each warnEvery, the next one
//     carrying suppressed=N.
type Logger struct {
	log      *slog.Logger
	warnings *lograte.Limiter // per key and message
}

// NewLogger returns a Logger that writes to l (nil: nowhere), limiting
// warnings on clock c.
func NewLogger(l *slog.Logger, c clock.Clock) Logger {
	if l == nil {
		return Logger{}
	}
	return Logger{log: l, warnings: lograte.New(warnEvery, c)}
}

// Info logs msg at Info.
func (l Logger) Info(msg string, attrs ...slog.Attr) {
	if l.log != nil {
		l.log.LogAttrs(context.Background(), slog.LevelInfo, msg, attrs...)
	}
}

// WarnHost logs msg at Warn about host addr, within the rate limit.
func (l Logger) WarnHost(addr, msg string, attrs ...slog.Attr) {
	if l.log == nil {
		return
	}
	l.Warn(addr, msg, append([]slog.Attr{slog.String("host", addr)}, attrs...)...)
}

// Warn logs msg at Warn, at most once each warnEvery for key and msg.
func (l Logger) Warn(key, msg string, attrs ...slog.Attr) {
	if l.log == nil {
		return
	}
	ok, suppressed := l.warnings.Allow(key + "\x00" + msg)
	if !ok {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed", suppressed))
	}
	l.log.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
}

// HostChange logs one host's change of state, role or server (the server
// its name leads to), or its arrival or departure.
func (l Logger) HostChange(ch hoststate.Change) {
	switch {
	case l.log == nil:
	case ch.Added:
		l.Info("pgfailover: host added", slog.String("host", ch.After.Addr), slog.String("role", ch.After.Claimed.String()))
	case ch.Removed:
		l.Info("pgfailover: host removed", slog.String("host", ch.Before.Addr))
	case ch.Before.Server != ch.After.Server && ch.Before.State == ch.After.State && ch.Before.Role == ch.After.Role:
		l.Info("pgfailover: host leads to another server",
			slog.String("host", ch.After.Addr),
			slog.String("server", ch.After.Server),
			slog.String("server_was", ch.Before.Server),
		)
	default:
		attrs := []slog.Attr{
			slog.String("host", ch.After.Addr),
			slog.String("state", ch.After.State.String()),
			slog.String("was", ch.Before.State.String()),
			slog.String("role", ch.After.Role.String()),
			slog.String("role_was", ch.Before.Role.String()),
		}
		if ch.Before.Server != ch.After.Server {
			attrs = append(attrs, slog.String("server", ch.After.Server), slog.String("server_was", ch.Before.Server))
		}
		l.Info("pgfailover: host changed", attrs...)
	}
}

// FailoverEnded logs the end of a time without a usable host: d after
// the host at failed failed, the target has host ("" when it is not
// known which) again.
func (l Logger) FailoverEnded(failed, host string, d time.Duration) {
	if l.log == nil {
		return
	}
	attrs := []slog.Attr{slog.String("failed", failed), slog.Duration("duration", d)}
	if host != "" {
		attrs = append(attrs, slog.String("host", host))
	}
	l.Info("pgfailover: failover ended", attrs...)
}

// Episode logs a call's failover episode at Warn, with its outcome (err
// is its error), how many hosts it tried and how long it waited, limited
// per host that failed first (first). last is the host the call ended on,
// "" when none.
func (l Logger) Episode(first, last string, outcome CallOutcome, attempts int, waited time.Duration, err error) {
	if l.log == nil {
		return
	}
	attrs := []slog.Attr{
		slog.String("outcome", outcome.String()),
		slog.Int("attempts", attempts),
		slog.Duration("waited", waited),
	}
	if last != "" {
		attrs = append(attrs, slog.String("last_host", last))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	l.WarnHost(first, "pgfailover: failover", attrs...)
}
