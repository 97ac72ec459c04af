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
	// PeekFresh means the socket returned data less than RecentRead ago,
	// so PeekIdle did not look (see RecentRead).
	PeekFresh
)

func (r PeekResult) String() string {
	switch r {
	case PeekEmpty:
		return "empty"
	case PeekPending:
		return "pending"
	case PeekClosed:
		return "closed"
	case PeekFresh:
		return "fresh"
	default:
		return "unsupported"
	}
}

// Peeker peeks one connection. It is built once per connection so that each
// peek costs one system call and no allocation. A Peeker is not safe for
// concurrent use; a pooled connection has one user at a time.
type Peeker struct {
	rc    syscall.RawConn
	peek  func(fd uintptr)
	reads *readTimes // when its last read was; nil when the connection does not record it
	res   PeekResult
	buf   [1]byte
}

// NewPeeker returns a Peeker for c, or nil when c (or the connection under
// a TLS layer) does not expose its socket. A connection dialled through
// DialFunc or Sockets.DialFunc records when it last read something, for
// PeekIdle.
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
	p := &Peeker{rc: rc, reads: readsOf(c)}
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

// PeekIdle is Peek before an idle connection is reused: when its socket
// returned data less than RecentRead ago, it reports PeekFresh without a
// system call. The server answered on it a moment ago, so only a FATAL
// sent in that moment can be waiting, and that is the window PeekIdle
// accepts (see RecentRead). Otherwise, and for a connection that does not
// record its reads, it peeks.
func (p *Peeker) PeekIdle() PeekResult {
	if p == nil {
		return PeekUnsupported
	}
	if p.reads != nil && p.reads.readWithin(RecentRead) {
		return PeekFresh
	}
	return p.Peek()
}
