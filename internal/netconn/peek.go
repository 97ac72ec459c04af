package netconn

import (
	"crypto/tls"
	"net"
	"syscall"
)

// PeekResult is what a peek found.
type PeekResult uint8

const (
	// PeekEmpty means nothing is waiting: the connection looks usable.
	PeekEmpty PeekResult = iota
	// PeekPending means bytes arrived that nobody asked for (a FATAL
	// error, a notice, a parameter change). The connection's state is
	// uncertain.
	PeekPending
	// PeekClosed means the peer closed the connection or the socket failed.
	PeekClosed
	// PeekUnsupported means the connection is not a socket this package
	// can peek.
	PeekUnsupported
)

func (r PeekResult) String() string {
	switch r {
	case PeekEmpty:
		return "empty"
	case PeekPending:
		return "pending"
	case PeekClosed:
		return "closed"
	default:
		return "unsupported"
	}
}

// Peeker peeks one connection. It is built once per connection so that each
// peek costs one system call and no allocation. A Peeker is not safe for
// concurrent use; a pooled connection has one user at a time.
type Peeker struct {
	rc   syscall.RawConn
	peek func(fd uintptr)
	res  PeekResult
	buf  [1]byte
}

// NewPeeker returns a Peeker for c, or nil when c (or the connection under
// a TLS layer) does not expose its socket.
func NewPeeker(c net.Conn) *Peeker {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &Peeker{rc: rc}
	p.peek = p.peekFD
	return p
}

// Peek reports what is waiting in the socket. A nil Peeker reports
// PeekUnsupported. It never blocks: it goes through RawConn.Control, not
// RawConn.Read, because another goroutine may hold the socket's read lock
// (pgconn keeps a background read pending on some idle connections), and
// RawConn.Read would wait for it.
func (p *Peeker) Peek() PeekResult {
	if p == nil {
		return PeekUnsupported
	}
	if err := p.rc.Control(p.peek); err != nil {
		return PeekClosed
	}
	return p.res
}
