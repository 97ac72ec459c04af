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

// readTimes records when a connection's last Read returned data.
// pgconn reads a connection only while it waits for an answer, so that is
// the time the server last answered: the connection's last sign of life
// before it was given back. The connections of DialFunc (timedConn) and
// of Sockets.DialFunc (socket) each keep one, in the wrapper that also
// does their other work, so that a Read goes through one wrapper.
type readTimes struct {
	// lastRead is the time of the last Read that returned data, as time
	// since opened on clock, plus 1 ns; 0 until the first. It is atomic
	// because pgconn may leave a background read running on a connection
	// given back, while the next user's PeekIdle reads lastRead.
	lastRead atomic.Int64
	opened   time.Time
	clock    clock.Clock // nil: the monotonic clock, through time.Since
}

// start sets the time the connection was opened; with clk nil, the
// times are read on the monotonic clock.
func (t *readTimes) start(clk clock.Clock) {
	t.clock = clk
	if clk != nil {
		t.opened = clk.Now()
	} else {
		t.opened = time.Now()
	}
}

// elapsed is the time since the connection was opened. time.Since reads
// only the monotonic clock (one vDSO call, about 30 ns here; time.Now
// reads the wall clock as well, about 65 ns).
func (t *readTimes) elapsed() time.Duration {
	if t.clock != nil {
		return t.clock.Now().Sub(t.opened)
	}
	return time.Since(t.opened)
}

// read records a Read that returned n bytes.
func (t *readTimes) read(n int) {
	if n > 0 {
		t.lastRead.Store(int64(t.elapsed()) + 1)
	}
}

// readWithin reports whether a Read returned data less than d ago.
func (t *readTimes) readWithin(d time.Duration) bool {
	last := t.lastRead.Load()
	return last != 0 && t.elapsed()-time.Duration(last-1) < d
}

// timedConn is a connection that records when its last Read returned
// data: DialFunc's.
type timedConn struct {
	net.Conn
	readTimes
}

// newTimedConn wraps c; with clk nil, it reads the monotonic clock.
func newTimedConn(c net.Conn, clk clock.Clock) *timedConn {
	t := &timedConn{Conn: c}
	t.start(clk)
	return t
}

// Read reads from the connection and records the time when data came.
func (c *timedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read(n)
	return n, err
}

// SyscallConn exposes the socket underneath, for the peek (NewPeeker) and
// the socket options.
func (c *timedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// readsOf returns the record of c's reads (a *socket's or a
// *timedConn's), or nil.
func readsOf(c net.Conn) *readTimes {
	switch x := c.(type) {
	case *timedConn:
		return &x.readTimes
	case *socket:
		return &x.readTimes
	}
	return nil
}
