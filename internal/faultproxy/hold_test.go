package faultproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// Hold keeps back what the upstream sends on the connections open then,
// their end included, until it is released; the client's bytes still go
// up, and a connection accepted after it is not held.
func TestHold(t *testing.T) {
	u := startUpstream(t, false)
	p := startProxy(t, u)
	c := dial(t, p)
	s := u.next(t)
	send(t, s, "ready")
	expect(t, c, "ready")

	release := p.Hold()
	send(t, c, "query")
	expect(t, s, "query")
	send(t, s, "late answer")
	s.Close()

	later := dial(t, p)
	ls := u.next(t)
	send(t, ls, "fresh")
	expect(t, later, "fresh")

	// The held connection hears nothing: neither the answer nor the end.
	expectSilent(t, c)

	release()
	release() // a second call does nothing
	expect(t, c, "late answer")
	if err := readErr(t, c); err != io.EOF {
		t.Fatalf("after the release: %v; want the end of stream", err)
	}
}

// Close ends a held connection without its release.
func TestCloseEndsAHold(t *testing.T) {
	u := startUpstream(t, false)
	p := startProxy(t, u)
	c := dial(t, p)
	s := u.next(t)
	send(t, s, "ready")
	expect(t, c, "ready")
	p.Hold()
	send(t, s, "never")
	p.Close()
	c.SetReadDeadline(time.Now().Add(deadline))
	got, err := io.ReadAll(c)
	if len(got) != 0 || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a held connection after Close: read %q, %v; want its end and nothing held", got, err)
	}
}

// Hold with a port holds only the connection whose link to the upstream
// leaves from it.
func TestHoldOnePort(t *testing.T) {
	u := startUpstream(t, false)
	p := startProxy(t, u)
	c1 := dial(t, p)
	s1 := u.next(t)
	c2 := dial(t, p)
	s2 := u.next(t)
	release := p.Hold(s2.RemoteAddr().(*net.TCPAddr).Port)
	send(t, s2, "two")
	send(t, s1, "one")
	expect(t, c1, "one")
	expectSilent(t, c2)
	release()
	expect(t, c2, "two")
}
