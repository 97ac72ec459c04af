package netconn

import (
	"net"
	"testing"
	"time"
)

// pair returns both ends of a real loopback TCP connection.
func pair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// waitFor polls the peeker until it reports want, within a generous deadline.
func waitFor(t *testing.T, p *Peeker, want PeekResult) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := p.Peek()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Peek() = %v, want %v", got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPeek(t *testing.T) {
	client, server := pair(t)
	p := NewPeeker(client)
	if p == nil {
		t.Fatal("New returned nil for a TCP connection")
	}
	if got := p.Peek(); got != PeekEmpty {
		t.Fatalf("idle connection: Peek() = %v, want empty", got)
	}

	if _, err := server.Write([]byte("E")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, PeekPending)
	// Peeking consumed nothing: the byte is still there to read.
	buf := make([]byte, 1)
	if _, err := client.Read(buf); err != nil || buf[0] != 'E' {
		t.Fatalf("read after peek = %q, %v", buf, err)
	}
	if got := p.Peek(); got != PeekEmpty {
		t.Fatalf("after reading: Peek() = %v, want empty", got)
	}

	server.Close()
	waitFor(t, p, PeekClosed)
}

func TestPeekUnsupported(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	p := NewPeeker(a)
	if p != nil {
		t.Fatal("NewPeeker(net.Pipe) should return nil")
	}
	if got := p.Peek(); got != PeekUnsupported {
		t.Fatalf("nil Peeker: Peek() = %v", got)
	}
}

func BenchmarkPeek(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			buf := make([]byte, 1)
			c.Read(buf)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	p := NewPeeker(c)
	b.ReportAllocs()
	for b.Loop() {
		if p.Peek() != PeekEmpty {
			b.Fatal("unexpected data")
		}
	}
}

// TestPeekWhileAnotherGoroutineReads checks that Peek never waits for a
// read that is pending on the same connection (pgconn can leave one
// running on an idle connection).
func TestPeekWhileAnotherGoroutineReads(t *testing.T) {
	client, server := pair(t)
	p := NewPeeker(client)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 1)
		client.Read(buf)
	}()
	peeked := make(chan struct{})
	go func() {
		defer close(peeked)
		// Keep peeking for a while, so that most peeks run while the read
		// is pending.
		for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
			if got := p.Peek(); got != PeekEmpty {
				t.Errorf("Peek() = %v with nothing sent", got)
				return
			}
		}
	}()
	select {
	case <-peeked:
	case <-time.After(10 * time.Second):
		t.Fatal("Peek blocked behind a pending read")
	}
	server.Write([]byte("x"))
	<-readDone
}
