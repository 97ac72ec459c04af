package faultproxy

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// chunkSize is the most one read takes from a socket.
	chunkSize = 32 << 10
	// queueLen is how many chunks a direction holds while they wait out
	// the latency; a full queue stops the reads, as a full socket buffer
	// would.
	queueLen = 64
)

// Proxy is a TCP proxy from a local address to an upstream address, or
// to several taken in turn, with faults that can be switched on and off
// while connections are open. Its methods are safe for concurrent use.
type Proxy struct {
	ln net.Listener
	// ctx ends the dials to the upstream in flight when Close is called.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts every goroutine of the proxy; Close waits for them.
	wg sync.WaitGroup
	// dropped counts the bytes the blackhole dropped.
	dropped atomic.Int64
	// accepted counts the connections accepted.
	accepted atomic.Int64

	mu sync.Mutex // guards the fields below; no I/O while held
	// upstreams are the addresses new connections dial, in turn; next is
	// the index of the one the next connection dials.
	upstreams []string
	next      int
	latency   time.Duration
	blackhole bool
	// lifted is closed when the blackhole ends; a new one is made when it
	// begins.
	lifted chan struct{}
	links  map[*link]struct{} // the open connections
	closed bool
}

// link is one client connection and its connection to the upstream.
type link struct {
	client, server *net.TCPConn
	done           chan struct{} // closed when the link is closed
	once           sync.Once
	// held is set when the upstream ended during a blackhole and the
	// client's side is kept open until it ends.
	held atomic.Bool
	// hold, when set, is a channel closed when Hold's release is called:
	// until then what the upstream sends, its end included, waits.
	hold atomic.Pointer[chan struct{}]
}

// close closes both sides of the link, with a TCP RST each way when rst
// is set. Only the first call does anything.
func (l *link) close(rst bool) {
	l.once.Do(func() {
		if rst {
			// SO_LINGER 0: Close sends a RST and discards what is unsent.
			l.client.SetLinger(0)
			l.server.SetLinger(0)
		}
		l.client.Close()
		l.server.Close()
		close(l.done)
	})
}

// chunk is the bytes of one read and when they are due at the other side.
type chunk struct {
	data []byte
	due  time.Time
}

// New starts a proxy on a free port of 127.0.0.1 that forwards every
// connection to upstream (host:port). Close stops it.
func New(upstream string) (*Proxy, error) { return Listen("127.0.0.1:0", upstream) }

// Listen is New on the local address addr (host:port, port 0 for a free
// one): proxies on 127.0.0.2:p and 127.0.0.3:p stand for two hosts that
// share a port, between which a name can move.
func Listen(addr, upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		ln:        ln,
		upstreams: []string{upstream},
		ctx:       ctx,
		cancel:    cancel,
		lifted:    make(chan struct{}),
		links:     map[*link]struct{}{},
	}
	close(p.lifted) // no blackhole yet
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's address, host:port, for clients to dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetUpstream points the connections accepted from then on at addrs
// (host:port each): with one address every new connection dials it; with
// several, each new connection dials the next one in turn, starting again
// from the first; with none, new connections are accepted and closed at
// once. Open connections stay with the upstream they dialed.
func (p *Proxy) SetUpstream(addrs ...string) {
	addrs = append([]string(nil), addrs...)
	p.mu.Lock()
	p.upstreams = addrs
	p.next = 0
	p.mu.Unlock()
}

// pickUpstream returns the address the connection just accepted dials,
// or "" when there is none.
func (p *Proxy) pickUpstream() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.upstreams) == 0 {
		return ""
	}
	addr := p.upstreams[p.next%len(p.upstreams)]
	p.next = (p.next + 1) % len(p.upstreams)
	return addr
}

// SetLatency delays every byte read from then on by d in each direction;
// 0 ends the delay. A request and its answer take 2d longer.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// SetBlackhole starts (on) or ends a blackhole: while it lasts, every byte
// read from either side is dropped, and none is written but for one write
// already under way when it began. Connections stay open; a connection
// whose upstream closed meanwhile is closed when the blackhole ends.
func (p *Proxy) SetBlackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && !p.blackhole:
		p.blackhole = true
		p.lifted = make(chan struct{})
	case !on && p.blackhole:
		p.blackhole = false
		close(p.lifted)
	}
}

// Hold keeps back what the upstream sends on connections open now, their
// end or reset included, until release is called: the client hears
// nothing more from them, while what it sends still reaches the upstream.
// With no ports, every open connection is held; with ports, those whose
// connection to the upstream leaves from one of these local ports, the
// client port the upstream sees (PostgreSQL's
// pg_stat_activity.client_port). Connections accepted later are not held.
// release may be called more than once; Close ends a held connection
// without it.
func (p *Proxy) Hold(ports ...int) (release func()) {
	ch := make(chan struct{})
	p.mu.Lock()
	for l := range p.links {
		if len(ports) == 0 || slices.Contains(ports, l.server.LocalAddr().(*net.TCPAddr).Port) {
			l.hold.Store(&ch)
		}
	}
	p.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// waitHold returns once l is not held, false when l closed first.
func (l *link) waitHold() bool {
	h := l.hold.Load()
	if h == nil {
		return true
	}
	select {
	case <-*h:
		return true
	case <-l.done:
		return false
	}
}

// Dropped returns how many bytes the blackhole has dropped so far.
func (p *Proxy) Dropped() int64 { return p.dropped.Load() }

// Accepted returns how many connections the proxy has accepted.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Reset closes every open connection with a TCP RST to the client and to
// the upstream, discarding what was not delivered. New connections are
// accepted as before.
func (p *Proxy) Reset() { p.closeLinks(true) }

// Cut closes every open connection, to the client and to the upstream, as
// an orderly close does. New connections are accepted as before.
func (p *Proxy) Cut() { p.closeLinks(false) }

func (p *Proxy) closeLinks(rst bool) {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		p.closeLink(l, rst)
	}
}

// Close stops listening, closes every connection and returns when every
// goroutine of the proxy has ended. Later calls do nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

// closeLink closes l and forgets it.
func (p *Proxy) closeLink(l *link, rst bool) {
	l.close(rst)
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// faults returns the latency and whether a blackhole is on.
func (p *Proxy) faults() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency, p.blackhole
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // Close closed the listener
		}
		p.accepted.Add(1)
		// The upstream is chosen here, in the order of the accepts.
		upstream := p.pickUpstream()
		if upstream == "" {
			c.Close()
			continue
		}
		p.wg.Go(func() { p.serve(c.(*net.TCPConn), upstream) })
	}
}

// serve dials upstream for client and copies both ways until the link
// closes.
func (p *Proxy) serve(client *net.TCPConn, upstream string) {
	var d net.Dialer
	s, err := d.DialContext(p.ctx, "tcp", upstream)
	if err != nil {
		client.Close()
		return
	}
	l := &link{client: client, server: s.(*net.TCPConn), done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.close(false)
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	p.wg.Go(func() { p.pipe(l, l.server, l.client, false) })
	p.pipe(l, l.client, l.server, true)
}

// pipe reads src and hands what it reads to a goroutine that writes it to
// dst when it is due; down says that src is the upstream.
func (p *Proxy) pipe(l *link, dst, src *net.TCPConn, down bool) {
	queue := make(chan chunk, queueLen)
	p.wg.Go(func() { p.deliver(l, dst, queue, down) })
	defer close(queue)
	for {
		buf := make([]byte, chunkSize)
		n, err := src.Read(buf)
		if n > 0 {
			latency, blackhole := p.faults()
			if blackhole {
				p.dropped.Add(int64(n))
			} else {
				select {
				case queue <- chunk{data: buf[:n], due: time.Now().Add(latency)}:
				case <-l.done:
					return
				}
			}
		}
		if err != nil {
			if errors.Is(err, syscall.ECONNRESET) {
				// Pass a reset on as one, after what came before it.
				select {
				case queue <- chunk{}:
				case <-l.done:
				}
			}
			return
		}
	}
}

// deliver writes the chunks of queue to dst, each when it is due, and
// closes the link when src ended and every chunk read before was written.
// An empty chunk stands for a reset of src, passed on to dst.
func (p *Proxy) deliver(l *link, dst *net.TCPConn, queue <-chan chunk, down bool) {
	rst := false
	for c := range queue {
		if c.data == nil {
			rst = true
			continue
		}
		if down && !l.waitHold() {
			return
		}
		if wait := time.Until(c.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
		}
		if _, blackhole := p.faults(); blackhole {
			p.dropped.Add(int64(len(c.data)))
			continue
		}
		if _, err := dst.Write(c.data); err != nil {
			p.closeLink(l, false)
			return
		}
	}
	if down {
		if !l.waitHold() {
			return
		}
		p.holdWhileBlackholed(l)
	}
	p.closeLink(l, rst)
}

// holdWhileBlackholed returns when no blackhole is on, or the link closed:
// an upstream that ended during a blackhole keeps the client waiting, as a
// host that stops answering does.
func (p *Proxy) holdWhileBlackholed(l *link) {
	p.mu.Lock()
	blackhole, lifted := p.blackhole, p.lifted
	p.mu.Unlock()
	if !blackhole {
		return
	}
	l.held.Store(true)
	select {
	case <-lifted:
	case <-l.done:
	}
}
