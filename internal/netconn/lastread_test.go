package netconn

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/internal/clock"
)

// PeekIdle skips the peek only while the socket's last read is younger
// than RecentRead, on the connection's own clock: a socket that answered
// a moment ago is handed out unlooked at, even with a FATAL waiting (the
// window), and one that has rested as long as RecentRead, or that a caller
// held unused for a second, is peeked and its FATAL found.
func TestPeekIdleSkipsOnlyRightAfterARead(t *testing.T) {
	client, server := pair(t)
	clk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	tc := newTimedConn(client, clk)
	p := NewPeeker(tc)
	if p == nil || p.reads != &tc.readTimes {
		t.Fatal("NewPeeker did not find the connection's reads")
	}

	// Nothing read yet: peeked.
	if got := p.PeekIdle(); got != PeekEmpty {
		t.Fatalf("before any read: PeekIdle() = %v, want empty", got)
	}
	clk.Advance(time.Hour)
	if got := p.PeekIdle(); got != PeekEmpty {
		t.Fatalf("an hour in, before any read: PeekIdle() = %v, want empty", got)
	}

	answer := func() {
		t.Helper()
		if _, err := server.Write([]byte("Z")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1)
		if _, err := tc.Read(buf); err != nil || buf[0] != 'Z' {
			t.Fatalf("read = %q, %v", buf, err)
		}
	}
	answer()
	// The server's last words arrive right after its answer.
	if _, err := server.Write([]byte("E")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, PeekPending)

	var since time.Duration
	for _, step := range []struct {
		advance time.Duration
		want    PeekResult
	}{
		{0, PeekFresh}, // read just now: not looked at
		{RecentRead - time.Nanosecond, PeekFresh}, // still inside the window
		{time.Nanosecond, PeekPending},            // RecentRead since the read: peeked
		{time.Second, PeekPending},                // held a second, then given back
	} {
		clk.Advance(step.advance)
		since += step.advance
		if got := p.PeekIdle(); got != step.want {
			t.Fatalf("%v after the read: PeekIdle() = %v, want %v", since, got, step.want)
		}
	}

	// Reading what was waiting is a read: fresh again, then empty.
	buf := make([]byte, 1)
	if _, err := tc.Read(buf); err != nil || buf[0] != 'E' {
		t.Fatalf("read = %q, %v", buf, err)
	}
	if got := p.PeekIdle(); got != PeekFresh {
		t.Fatalf("right after a read: PeekIdle() = %v, want fresh", got)
	}
	clk.Advance(RecentRead)
	if got := p.PeekIdle(); got != PeekEmpty {
		t.Fatalf("RecentRead after the last read, nothing sent: PeekIdle() = %v, want empty", got)
	}

	// A read that returns nothing (its deadline passed) is no sign of
	// life: the stamp stays where it was.
	if err := tc.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := tc.Read(buf); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline = %d, %v", n, err)
	}
	if got := p.PeekIdle(); got != PeekEmpty {
		t.Fatalf("after a read that returned nothing: PeekIdle() = %v, want empty", got)
	}

	// Peek itself always looks.
	if err := tc.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	answer()
	if _, err := server.Write([]byte("E")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, PeekPending)
}

// The connections of both dialers record their reads, once, and the
// Peeker finds them under a socket and under TLS.
func TestDialledConnectionsRecordReads(t *testing.T) {
	addr := listen(t)
	ctx := context.Background()
	var ss Sockets

	direct, err := DialFunc(0)(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if readsOf(direct) == nil {
		t.Error("DialFunc's connection does not record its reads")
	}

	// Sockets over DialFunc: one record, not two.
	over, err := ss.DialFunc(DialFunc(0), true)(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	tc := readsOf(over)
	if tc == nil {
		t.Fatal("Sockets over DialFunc: the connection does not record its reads")
	}
	if _, twice := over.(*socket).Conn.(*timedConn); twice {
		t.Error("Sockets over DialFunc records the reads twice")
	}

	// Sockets over a dialer of the user's.
	plain, err := ss.DialFunc(base, true)(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if readsOf(plain) == nil {
		t.Error("Sockets over a plain dialer: the connection does not record its reads")
	}

	for name, c := range map[string]net.Conn{
		"socket":        over,
		"TLS on socket": tls.Client(over, &tls.Config{InsecureSkipVerify: true}),
	} {
		if p := NewPeeker(c); p == nil || p.reads != tc {
			t.Errorf("%s: the Peeker does not see the connection's reads", name)
		}
	}
	// A connection of another dialer is always peeked.
	client, _ := pair(t)
	if p := NewPeeker(client); p == nil || p.reads != nil {
		t.Error("a plain TCP connection: want a Peeker without reads")
	}
}

// nopConn is a net.Conn whose Read returns at once, for measuring what
// recording a read adds.
type nopConn struct{ net.Conn }

func (nopConn) Read(b []byte) (int, error) { return len(b), nil }

// BenchmarkRead is what recording the time of a read adds to it
// (timed), beside the bare Read of a connection (plain).
func BenchmarkRead(b *testing.B) {
	buf := make([]byte, 8192)
	for _, side := range []struct {
		name string
		c    net.Conn
	}{
		{"plain", nopConn{}},
		{"timed", newTimedConn(nopConn{}, nil)},
	} {
		b.Run(side.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				side.c.Read(buf)
			}
		})
	}
}

// BenchmarkPeekIdle is what deciding costs on the real clock: a read's
// record of its time and PeekIdle right after it (fresh: no system
// call), beside PeekIdle on a socket that rested (the peek).
func BenchmarkPeekIdle(b *testing.B) {
	client, _ := pair(b)
	tc := newTimedConn(client, nil)
	p := NewPeeker(tc)
	b.Run("fresh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tc.lastRead.Store(int64(tc.elapsed()) + 1) // as Read does
			// Fresh unless the goroutine lost the processor for RecentRead
			// in between, which a loaded machine does now and then.
			p.PeekIdle()
		}
	})
	b.Run("rested", func(b *testing.B) {
		tc.lastRead.Store(1) // read when opened
		b.ReportAllocs()
		for b.Loop() {
			if p.PeekIdle() != PeekEmpty {
				b.Fatal("unexpected data")
			}
		}
	})
}
