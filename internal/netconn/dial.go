package netconn

import (
	"context"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TCP settings of the connections DialFunc makes.
const (
	// DefaultTCPUserTimeout is tcp_user_timeout's default, which
	// failover.ParseConfig applies: how long data sent to a server may stay
	// unacknowledged before the kernel drops the connection (Linux only).
	// 10 s is far beyond any retransmission on a working network, and
	// short against failover_max_duration (30 s), so a statement sent into
	// a network blackhole fails within about 10 s with
	// ErrCommitOutcomeUnknown instead of waiting out the kernel's default
	// of 15 retransmissions, about 15 minutes.
	DefaultTCPUserTimeout = 10 * time.Second

	// keepAliveIdle, keepAliveInterval and keepAliveCount are the TCP
	// keepalive settings: the first probe after 5 s of silence, then one
	// every 5 s. pgconn's own dialer leaves Go's defaults (15 s, 15 s, 9
	// probes: about 2.5 minutes to notice a silent peer). Keepalives are
	// what notices a dead peer when nothing is unacknowledged, such as a
	// statement waiting for its answer: with tcp_user_timeout set, Linux
	// drops the connection at the first probe once the peer has been
	// silent for that long (about 10 s by default); without it, after
	// the 3 probes fail (about 20 s).
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
)

// DialFunc returns the DialFunc failover.ParseConfig installs in place of
// pgconn's: pgconn's (a net.Dialer; connect_timeout bounds the dial through
// the context pgconn passes) with shorter keepalives and, on Linux,
// TCP_USER_TIMEOUT set to userTimeout on TCP sockets. userTimeout 0 leaves
// the operating system's default. Its connections record when they last
// read something (Peeker.PeekIdle).
func DialFunc(userTimeout time.Duration) pgconn.DialFunc {
	d := &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{
			Enable:   true,
			Idle:     keepAliveIdle,
			Interval: keepAliveInterval,
			Count:    keepAliveCount,
		},
	}
	if userTimeout > 0 {
		ms := int(userTimeout / time.Millisecond)
		d.Control = func(network, _ string, c syscall.RawConn) error {
			switch network {
			case "tcp", "tcp4", "tcp6":
			default:
				return nil // unix sockets have no such timeout
			}
			var serr error
			if err := c.Control(func(fd uintptr) { serr = setTCPUserTimeout(fd, ms) }); err != nil {
				return err
			}
			return serr
		}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newTimedConn(c, nil), nil
	}
}
