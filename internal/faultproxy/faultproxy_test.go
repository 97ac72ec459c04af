package faultproxy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// deadline bounds every wait of these tests: generous, since the machine
// may be loaded; a test that passes never waits that long.
const deadline = 30 * time.Second

// upstream is a TCP server whose accepted connections the test drives.
type upstream struct {
	ln    net.Listener
	conns chan *net.TCPConn
	wg    sync.WaitGroup

	mu   sync.Mutex // guards all; no I/O while held
	all  []*net.TCPConn
	echo bool
}

// startUpstream listens on a free port until the test ends; with echo,
// every connection sends back what it reads.
func startUpstream(t *testing.T, echo bool) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{ln: ln, conns: make(chan *net.TCPConn, 16), echo: echo}
	u.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*net.TCPConn)
			u.mu.Lock()
			u.all = append(u.all, tc)
			u.mu.Unlock()
			if echo {
				u.wg.Go(func() { io.Copy(tc, tc); tc.Close() })
				continue
			}
			u.conns <- tc
		}
	})
	t.Cleanup(func() {
		ln.Close()
		u.mu.Lock()
		for _, c := range u.all {
			c.Close()
		}
		u.mu.Unlock()
		u.wg.Wait()
	})
	return u
}

func (u *upstream) addr() string { return u.ln.Addr().String() }

// next returns the next connection the upstream accepted.
func (u *upstream) next(t *testing.T) *net.TCPConn {
	t.Helper()
	select {
	case c := <-u.conns:
		return c
	case <-time.After(deadline):
		t.Fatal("the upstream accepted no connection")
		return nil
	}
}

// startProxy starts a proxy to u, closed when the test ends.
func startProxy(t *testing.T, u *upstream) *Proxy {
	t.Helper()
	p, err := New(u.addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// dial connects to the proxy; the connection is closed when the test ends.
func dial(t *testing.T, p *Proxy) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// send writes s to c.
func send(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := c.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

// expect reads len(want) bytes from c and fails unless they are want.
func expect(t *testing.T, c net.Conn, want string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(deadline))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading %q: %v", want, err)
	}
	if string(got) != want {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// expectSilent fails unless a read on c, a connection the proxy holds
// open, finds nothing for 100ms: neither bytes nor an end.
func expectSilent(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on a held connection: %d bytes, %v; want the read deadline", n, err)
	}
}

// readErr reads from c until it fails and returns the error.
func readErr(t *testing.T, c net.Conn) error {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(deadline))
	_, err := io.Copy(io.Discard, c)
	if err == nil {
		return io.EOF // io.Copy reports an end of stream as nil
	}
	return err
}

// waitUntil polls cond until it holds, failing the test after deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(deadline); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// proxyGoroutines counts the goroutines running a method of a Proxy.
func proxyGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("faultproxy.(*Proxy)")) {
			count++
		}
	}
	return count
}

// waitHeld waits until a connection of p is held open by a blackhole
// after its upstream ended.
func waitHeld(t *testing.T, p *Proxy) {
	t.Helper()
	waitUntil(t, "a connection held open", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for l := range p.links {
			if l.held.Load() {
				return true
			}
		}
		return false
	})
}

// Bytes go through unchanged and in order, both ways, on connections
// open at once.
func TestForwardsBothWays(t *testing.T) {
	p := startProxy(t, startUpstream(t, true))
	var wg sync.WaitGroup
	for range 3 {
		c := dial(t, p)
		data := make([]byte, 4<<20)
		rand.Read(data)
		var werr error
		wg.Go(func() { _, werr = c.Write(data) })
		got := make([]byte, len(data))
		c.SetReadDeadline(time.Now().Add(deadline))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if werr != nil {
			t.Fatal(werr)
		}
		if !bytes.Equal(got, data) {
			t.Fatal("the echo differs from what was sent")
		}
	}
}

// With latency set, a round trip takes twice the latency more, and bytes
// keep their order.
func TestLatency(t *testing.T) {
	p := startProxy(t, startUpstream(t, true))
	c := dial(t, p)
	send(t, c, "warm")
	expect(t, c, "warm")

	const latency = 50 * time.Millisecond
	p.SetLatency(latency)
	for i := range 3 {
		start := time.Now()
		send(t, c, "ping")
		expect(t, c, "ping")
		if took := time.Since(start); took < 2*latency {
			t.Errorf("round trip %d took %v under %v of latency each way", i, took, latency)
		}
	}

	data := make([]byte, 1<<20)
	rand.Read(data)
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() { _, werr = c.Write(data) })
	got := make([]byte, len(data))
	c.SetReadDeadline(time.Now().Add(deadline))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if werr != nil || !bytes.Equal(got, data) {
		t.Fatalf("1 MiB through the latency came back changed (write: %v)", werr)
	}

	p.SetLatency(0)
	send(t, c, "fast")
	expect(t, c, "fast")
}

// A blackhole drops what either side sends while it lasts; the
// connection stays open, and bytes sent after it ends go through.
func TestBlackholeDropsBothWays(t *testing.T) {
	u := startUpstream(t, false)
	p := startProxy(t, u)
	c := dial(t, p)
	s := u.next(t)
	send(t, c, "hello")
	expect(t, s, "hello")

	p.SetBlackhole(true)
	send(t, c, "lost-up")
	waitUntil(t, "the client's bytes dropped", func() bool { return p.Dropped() == 7 })
	send(t, s, "lost-down")
	waitUntil(t, "the upstream's bytes dropped", func() bool { return p.Dropped() == 16 })

	p.SetBlackhole(false)
	send(t, c, "kept-up")
	expect(t, s, "kept-up")
	send(t, s, "kept-down")
	expect(t, c, "kept-down")
}

// A connection accepted during a blackhole is forwarded but hears
// nothing; when its upstream closes, the client's side stays open and
// silent until the blackhole ends, and is closed then.
func TestBlackholeHoldsConnections(t *testing.T) {
	u := startUpstream(t, false)
	p := startProxy(t, u)
	p.SetBlackhole(true)
	c := dial(t, p)
	s := u.next(t)
	send(t, c, "startup")
	send(t, s, "greeting")
	waitUntil(t, "both sides' bytes dropped", func() bool { return p.Dropped() == 15 })

	s.Close()
	waitHeld(t, p)
	// The proxy has decided to keep the client waiting: a read finds
	// nothing, not an end of stream.
	expectSilent(t, c)

	p.SetBlackhole(false)
	if err := readErr(t, c); err != io.EOF {
		t.Fatalf("after the blackhole ended: %v; want the end of stream", err)
	}
}

// Reset ends every connection with a TCP RST to both sides; an upstream's
// reset reaches the client as one; new connections go through.
func TestReset(t *testing.T) {
	u := startUpstream(t, false)
	p := startProxy(t, u)
	c := dial(t, p)
	s := u.next(t)
	send(t, c, "a")
	expect(t, s, "a")

	p.Reset()
	if err := readErr(t, c); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("client after Reset: %v; want ECONNRESET", err)
	}
	if err := readErr(t, s); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("upstream after Reset: %v; want ECONNRESET", err)
	}

	c = dial(t, p)
	s = u.next(t)
	send(t, c, "b")
	expect(t, s, "b")
	s.SetLinger(0)
	s.Close()
	if err := readErr(t, c); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("client after the upstream reset: %v; want ECONNRESET", err)
	}
}

// Cut closes every connection, each side seeing an end of stream, and
// new connections go through.
func TestCut(t *testing.T) {
	u := startUpstream(t, false)
	p := startProxy(t, u)
	c := dial(t, p)
	s := u.next(t)
	send(t, c, "a")
	expect(t, s, "a")

	p.Cut()
	if err := readErr(t, c); err != io.EOF {
		t.Errorf("client after Cut: %v; want the end of stream", err)
	}
	if err := readErr(t, s); err != io.EOF {
		t.Errorf("upstream after Cut: %v; want the end of stream", err)
	}

	c = dial(t, p)
	s = u.next(t)
	send(t, c, "b")
	expect(t, s, "b")
	send(t, s, "c")
	expect(t, c, "c")
}

// A client whose upstream cannot be reached is closed.
func TestUpstreamDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p, err := New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dial(t, p)
	if err := readErr(t, c); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("client of an unreachable upstream: %v; want its connection closed", err)
	}
}

// Close ends every goroutine of the proxy, whatever its connections are
// doing: bytes waiting out a latency, a connection held by a blackhole, a
// client writing. Later calls do nothing, and the port is closed.
func TestCloseJoinsGoroutines(t *testing.T) {
	u := startUpstream(t, false)
	before := goleak.IgnoreCurrent()
	p, err := New(u.addr())
	if err != nil {
		t.Fatal(err)
	}

	// Bytes read from here on wait an hour: a chunk waits out its delay,
	// and a client that keeps writing fills the queue and stops the reads.
	p.SetLatency(time.Hour)
	waiting := dial(t, p)
	u.next(t)
	send(t, waiting, "due in an hour")
	busy := dial(t, p)
	u.next(t)
	var wg sync.WaitGroup
	wg.Go(func() {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := busy.Write(chunk); err != nil {
				return
			}
		}
	})

	p.SetBlackhole(true)
	held := dial(t, p)
	u.next(t).Close()
	waitHeld(t, p)

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n := proxyGoroutines(); n != 0 {
		t.Errorf("%d goroutines of the proxy left when Close returned", n)
	}
	wg.Wait()
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	for name, c := range map[string]net.Conn{"waiting": waiting, "held": held} {
		if err := readErr(t, c); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s connection after Close: %v; want it closed", name, err)
		}
	}
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		c.Close()
		t.Error("the proxy's port still accepts after Close")
	}
	goleak.VerifyNone(t, before)
}

// acceptedBy returns the index in us of the upstream that accepts the
// next connection, with that connection.
func acceptedBy(t *testing.T, us ...*upstream) (int, *net.TCPConn) {
	t.Helper()
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(time.After(deadline))}}
	for _, u := range us {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(u.conns)})
	}
	i, v, _ := reflect.Select(cases)
	if i == 0 {
		t.Fatal("no upstream accepted a connection")
	}
	return i - 1, v.Interface().(*net.TCPConn)
}

// SetUpstream sends the connections accepted after it to the new
// upstream, or to several in turn, or closes them when there is none;
// open connections stay with the upstream they dialed.
func TestSetUpstream(t *testing.T) {
	us := []*upstream{startUpstream(t, false), startUpstream(t, false), startUpstream(t, false)}
	p := startProxy(t, us[0])

	first := dial(t, p)
	i, firstUp := acceptedBy(t, us...)
	if i != 0 {
		t.Fatalf("the first connection reached upstream %d, want 0", i)
	}
	send(t, first, "to-0")
	expect(t, firstUp, "to-0")

	p.SetUpstream(us[1].addr())
	for range 2 {
		c := dial(t, p)
		i, s := acceptedBy(t, us...)
		if i != 1 {
			t.Fatalf("a connection after SetUpstream(1) reached upstream %d", i)
		}
		send(t, c, "to-1")
		expect(t, s, "to-1")
	}

	p.SetUpstream(us[2].addr(), us[0].addr(), us[1].addr())
	for k, want := range []int{2, 0, 1, 2, 0, 1} {
		c := dial(t, p)
		i, s := acceptedBy(t, us...)
		if i != want {
			t.Fatalf("connection %d over three upstreams reached upstream %d, want %d", k, i, want)
		}
		send(t, s, "hello")
		expect(t, c, "hello")
	}

	// Each call starts again from its first address.
	p.SetUpstream(us[1].addr(), us[2].addr())
	dial(t, p)
	if i, _ := acceptedBy(t, us...); i != 1 {
		t.Fatalf("the first connection after SetUpstream(1, 2) reached upstream %d", i)
	}

	// No upstream: a new connection is accepted and closed, and dials
	// nothing.
	p.SetUpstream()
	if err := readErr(t, dial(t, p)); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a connection with no upstream: %v; want it closed", err)
	}
	for i, u := range us {
		select {
		case <-u.conns:
			t.Errorf("upstream %d accepted a connection with no upstream set", i)
		default:
		}
	}

	// The first connection stayed on upstream 0 throughout.
	send(t, first, "still-0")
	expect(t, firstUp, "still-0")
	send(t, firstUp, "from-0")
	expect(t, first, "from-0")
}
