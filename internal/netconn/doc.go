// Package netconn holds what the Pool does at the level of sockets, below
// pgconn: how a connection is dialled, which sockets to a host are open so
// that they can be cut, and whether an idle one already has something
// waiting.
//
// [DialFunc] is the dialer failover.ParseConfig installs in place of
// pgconn's: shorter TCP keepalives and, on Linux, TCP_USER_TIMEOUT (libpq's
// tcp_user_timeout, which pgconn does not implement), so that a statement
// sent into a network blackhole fails in seconds rather than after the
// kernel's retransmissions.
//
// [Sockets] is the set of open sockets to one host, built by wrapping each
// connection's DialFunc. When the Pool learns that the host does not
// answer, it closes them all at once and stops pgconn's cancel requests,
// which would otherwise keep a goroutine waiting up to 15 s each.
//
// [Peeker] tells, without blocking and without consuming anything, whether
// an idle database connection already has bytes or an end-of-file waiting
// in its socket. An idle PostgreSQL connection should have nothing to read.
// When the server shuts down or terminates the backend, it writes a FATAL
// message (or just closes the socket) that sits unread until the client
// next uses the connection. Sending a statement on such a connection
// wastes the call and, worse, makes the outcome of a write look uncertain.
// A peek before the statement is sent turns that uncertainty into proof:
// the connection was already dead, so nothing was sent.
//
// A peek is a system call, a few percent of a one-row query. The
// connections of both dialers record when they last read something, and
// [Peeker.PeekIdle] skips the peek when that was less than [RecentRead]
// ago: the server answered on the connection a moment ago, which only a
// FATAL sent in that moment can contradict.
package netconn
