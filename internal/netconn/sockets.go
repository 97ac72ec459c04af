package netconn

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Sockets is the set of open sockets to one host: every connection its
// pool and its probe dialled, and every cancel request pgconn sent there.
// It exists so that the Pool can cut them when waiting on them is
// pointless. pgconn, when a statement's context ends or its connection
// breaks, gives the connection up in a goroutine of its own that sends a
// cancel request to the server and then drains the socket, for up to 15 s
// each; pgxpool's Close waits for those goroutines. On a host that stopped
// answering that is 15 s spent on nothing, so:
//
//   - when the Pool learns that the host does not answer (Kill), every
//     socket to it is closed at once, in flight or not, and until the host
//     answers again cancel requests to it are not sent;
//   - when the Pool closes (Abandon), sockets pgconn has given up on are
//     closed, and cancel requests are no longer sent.
//
// A socket in a caller's hands on a host that answers is never cut. The
// zero value is an empty set, ready to use; a Sockets must not be copied
// after first use.
type Sockets struct {
	// mu guards the fields below. No I/O while held: closing a socket
	// happens after it is released.
	mu        sync.Mutex
	set       map[*socket]struct{}
	down      bool // the host does not answer: send it no cancel requests
	abandoned bool // the Pool is closing: send no cancel requests
	answered  bool // a socket closed since had read something (Answered)
}

// socket is one connection to the host, as dialled. It records its
// reads (Peeker.PeekIdle).
type socket struct {
	net.Conn
	readTimes
	set *Sockets
	// detached: pgconn has given the connection up (a cancel request was
	// dialled for it), or it is such a cancel request. Nobody waits for
	// its answer any more.
	detached atomic.Bool
	closed   atomic.Bool
}

// Read reads from the connection and records the time when data came.
func (s *socket) Read(b []byte) (int, error) {
	n, err := s.Conn.Read(b)
	s.read(n)
	return n, err
}

// Close removes the socket from its set and closes it.
func (s *socket) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.set.remove(s)
	}
	return s.Conn.Close()
}

// SyscallConn exposes the socket underneath, for the peek before a
// connection is handed out (NewPeeker).
func (s *socket) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := s.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// errNoCancel is what a cancel request's dial returns when the request is
// not sent: the host does not answer, or the Pool is closing.
var errNoCancel = errors.New("pgfailover: cancel request not sent: the host does not answer or the pool is closing")

// DialFunc returns the DialFunc of one connection, built on base. Each
// connection (one pgconn connect, whatever fallbacks it tries) gets its
// own, because pgconn dials its cancel requests with the DialFunc of the
// connection it cancels: a dial while the connection it made before is
// still open is a cancel request. With cancels false no cancel request is
// ever sent (the probe's question is not worth one). Its connections
// record when they last read something, whatever base is
// (Peeker.PeekIdle).
func (ss *Sockets) DialFunc(base pgconn.DialFunc, cancels bool) pgconn.DialFunc {
	var last atomic.Pointer[socket]
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		prev := last.Load()
		cancelReq := prev != nil && !prev.closed.Load()
		if cancelReq {
			prev.detached.Store(true)
			if !cancels || ss.refusesCancel() {
				// pgconn drains the connection after its cancel request,
				// for up to 15 s: nothing will come.
				prev.Conn.Close()
				return nil, errNoCancel
			}
		}
		c, err := base(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*timedConn); ok {
			c = tc.Conn // the socket records the reads itself
		}
		s := &socket{Conn: c, set: ss}
		s.start(nil)
		s.detached.Store(cancelReq)
		ss.add(s)
		if !cancelReq {
			last.Store(s)
		}
		return s, nil
	}
}

// Answered reports whether the server has sent anything on a socket of
// the set, open or closed since: a host whose server speaks is up, however
// slowly it goes on, unlike one whose connect or first answer never comes.
// A closed socket counts because pgconn closes one whose server refused
// TLS and opens another for its next try.
func (ss *Sockets) Answered() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.answered {
		return true
	}
	for s := range ss.set {
		if s.lastRead.Load() != 0 {
			return true
		}
	}
	return false
}

func (ss *Sockets) add(s *socket) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.set == nil {
		ss.set = make(map[*socket]struct{})
	}
	ss.set[s] = struct{}{}
}

func (ss *Sockets) remove(s *socket) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.set, s)
	ss.answered = ss.answered || s.lastRead.Load() != 0
}

func (ss *Sockets) refusesCancel() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.down || ss.abandoned
}

// Kill closes every socket to the host and sends it no cancel request
// until Up is called: the host does not answer. Statements in flight
// there fail at once instead of waiting for an answer that will not come.
func (ss *Sockets) Kill() {
	ss.mu.Lock()
	ss.down = true
	victims := make([]*socket, 0, len(ss.set))
	for s := range ss.set {
		victims = append(victims, s)
	}
	ss.mu.Unlock()
	for _, s := range victims {
		s.Conn.Close() // stays in the set until pgconn closes it
	}
}

// KillIfDown kills again when the host is known not to answer, for
// sockets opened since.
func (ss *Sockets) KillIfDown() {
	ss.mu.Lock()
	down := ss.down
	ss.mu.Unlock()
	if down {
		ss.Kill()
	}
}

// Up undoes Kill's refusal of cancel requests: the host answers again.
func (ss *Sockets) Up() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.down = false
}

// Abandon closes the sockets pgconn has given up on and stops cancel
// requests: the Pool is closing, and nothing waits for their answer.
func (ss *Sockets) Abandon() {
	ss.mu.Lock()
	ss.abandoned = true
	var victims []*socket
	for s := range ss.set {
		if s.detached.Load() {
			victims = append(victims, s)
		}
	}
	ss.mu.Unlock()
	for _, s := range victims {
		s.Conn.Close()
	}
}
