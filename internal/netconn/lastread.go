package netconn

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pgfailover/pgfailover/internal/clock"
)

// RecentRead is how recently a connection's socket must have returned
// data for [Peeker.PeekIdle] to hand it out without the peek's system
// call. A connection in steady use comes back within microseconds of
// reading its last answer: measured on 2 cores at a load average of 6,
// 95% of the reuses in a serial QueryRow loop came within 5 µs of the
// answer, and with 8 callers sharing 4 connections 96% came within 50 µs
// (and 97% within 100 µs); nearly all the others had sat idle for
// milliseconds. A connection that sat, in pgxpool, in database/sql or in
// the hands of a caller that acquired it and sent nothing, read nothing
// for that long, and is peeked.
//
// It is also the window the skip opens: a server that ends a session
// less than RecentRead after it last answered on it has its FATAL found
// only in answer to the next statement, which then fails as if cut in
// flight.
const RecentRead = 50 * time.Microsecond

// timedConn is a connection that records when its last Read returned
// data. pgconn reads a connection only while it waits for an answer, so
// that is the time the server last answered: the connection's last sign
// of life before it was given back.
type timedConn struct {
	net.Conn
	// lastRead is the time of the last Read that returned data, as time
	// since opened on clock, plus 1 ns; 0 until the first. It is atomic
	// because pgconn may leave a background read running on a connection
	// given back, while the next user's PeekIdle reads lastRead.
	lastRead atomic.Int64
	opened   time.Time
	clock    clock.Clock // nil: the monotonic clock, through time.Since
}

// newTimedConn wraps c; with clk nil, it reads the monotonic clock.
func newTimedConn(c net.Conn, clk clock.Clock) *timedConn {
	t := &timedConn{Conn: c, clock: clk}
	if clk != nil {
		t.opened = clk.Now()
	} else {
		t.opened = time.Now()
	}
	return t
}

// timed wraps c unless it already records its reads.
func timed(c net.Conn) net.Conn {
	if _, ok := c.(*timedConn); ok {
		return c
	}
	return newTimedConn(c, nil)
}

// elapsed is the time since the connection was opened. time.Since reads
// only the monotonic clock (one vDSO call, about 30 ns here; time.Now
// reads the wall clock as well, about 65 ns).
func (c *timedConn) elapsed() time.Duration {
	if c.clock != nil {
		return c.clock.Now().Sub(c.opened)
	}
	return time.Since(c.opened)
}

// Read reads from the connection and, when data came, records the time.
func (c *timedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.lastRead.Store(int64(c.elapsed()) + 1)
	}
	return n, err
}

// readWithin reports whether a Read returned data less than d ago.
func (c *timedConn) readWithin(d time.Duration) bool {
	last := c.lastRead.Load()
	return last != 0 && c.elapsed()-time.Duration(last-1) < d
}

// SyscallConn exposes the socket underneath, for the peek (NewPeeker) and
// the socket options.
func (c *timedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// readsOf returns the timedConn under c (a *socket, or itself), or nil.
func readsOf(c net.Conn) *timedConn {
	for {
		switch x := c.(type) {
		case *timedConn:
			return x
		case *socket:
			c = x.Conn
		default:
			return nil
		}
	}
}
