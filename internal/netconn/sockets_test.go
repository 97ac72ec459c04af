package netconn

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// listen returns the address of a loopback listener that accepts every
// connection and holds it open until the test ends.
func listen(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var accepted []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted = append(accepted, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		for _, c := range accepted {
			c.Close()
		}
	})
	return ln.Addr().String()
}

var base pgconn.DialFunc = (&net.Dialer{}).DialContext

// connClosed reports whether c was closed on this side: a read on a closed
// net.Conn fails at once with net.ErrClosed.
func connClosed(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, net.ErrClosed)
}

func (ss *Sockets) size() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.set)
}

func TestSocketsKill(t *testing.T) {
	addr := listen(t)
	var ss Sockets
	ctx := context.Background()
	a, err := ss.DialFunc(base, true)(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ss.DialFunc(base, true)(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if n := ss.size(); n != 2 {
		t.Fatalf("%d sockets in the set, want 2", n)
	}
	ss.Kill()
	if !connClosed(a) || !connClosed(b) {
		t.Fatal("Kill left a socket open")
	}
	// Cut sockets stay in the set until their owner closes them.
	a.Close()
	b.Close()
	if n := ss.size(); n != 0 {
		t.Fatalf("%d sockets in the set after Close, want 0", n)
	}

	// A socket dialled while the host is down is cut by KillIfDown.
	e, err := ss.DialFunc(base, true)(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ss.KillIfDown()
	if !connClosed(e) {
		t.Fatal("KillIfDown left a socket to a host that does not answer open")
	}

	dial := ss.DialFunc(base, true)
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A second dial on the same DialFunc, with the first socket open, is
	// pgconn's cancel request: not sent while the host is down.
	if _, err := dial(ctx, "tcp", addr); !errors.Is(err, errNoCancel) {
		t.Fatalf("cancel request to a host that does not answer: err = %v, want errNoCancel", err)
	}
	if !connClosed(c) {
		t.Fatal("the connection whose cancel request was refused is still open")
	}

	ss.Up()
	d, err := ss.DialFunc(base, true)(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ss.KillIfDown()
	if connClosed(d) {
		t.Fatal("KillIfDown cut a socket to a host that answers")
	}
}

func TestSocketsCancelRequests(t *testing.T) {
	addr := listen(t)
	var ss Sockets
	ctx := context.Background()

	dial := ss.DialFunc(base, true)
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cancel, err := dial(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("cancel request to a host that answers: %v", err)
	}
	defer cancel.Close()

	// Without cancels, the cancel request is not sent and the connection
	// it was for is closed: nothing will drain it.
	probeDial := ss.DialFunc(base, false)
	probe, err := probeDial(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	if _, err := probeDial(ctx, "tcp", addr); !errors.Is(err, errNoCancel) {
		t.Fatalf("cancel request with cancels off: err = %v, want errNoCancel", err)
	}
	if !connClosed(probe) {
		t.Fatal("the connection whose cancel request was refused is still open")
	}

	// Abandon cuts what pgconn gave up on (the connection a cancel request
	// was sent for, and the cancel request) and nothing else.
	other, err := ss.DialFunc(base, true)(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ss.Abandon()
	if !connClosed(conn) || !connClosed(cancel) {
		t.Fatal("Abandon left a given-up socket open")
	}
	if connClosed(other) {
		t.Fatal("Abandon cut a socket in use")
	}
	fresh := ss.DialFunc(base, true)
	f, err := fresh(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fresh(ctx, "tcp", addr); !errors.Is(err, errNoCancel) {
		t.Fatalf("cancel request after Abandon: err = %v, want errNoCancel", err)
	}
}

func TestSocketsAnswered(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	var ss Sockets
	s, err := ss.DialFunc(func(context.Context, string, string) (net.Conn, error) { return client, nil }, false)(context.Background(), "tcp", "db-a:5432")
	if err != nil {
		t.Fatal(err)
	}
	if ss.Answered() {
		t.Fatal("Answered before the server sent anything")
	}
	silent, err := ss.DialFunc(func(context.Context, string, string) (net.Conn, error) { c, _ := net.Pipe(); return c, nil }, false)(context.Background(), "tcp", "db-a:5432")
	if err != nil {
		t.Fatal(err)
	}
	silent.Close()
	if ss.Answered() {
		t.Fatal("Answered counts a socket closed before it read anything")
	}
	go server.Write([]byte("N"))
	if _, err := s.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if !ss.Answered() {
		t.Fatal("not Answered after a read returned the server's byte")
	}
	s.Close()
	if !ss.Answered() {
		t.Fatal("not Answered once the socket that read was closed")
	}
}
