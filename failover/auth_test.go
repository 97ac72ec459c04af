package failover_test

import (
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// TestWrongPasswordTriesOneHost: credentials hold for the whole cluster,
// so with a wrong password New reports the authentication failure from the
// first host, as pgx does, and sends the password to no other host.
func TestWrongPasswordTriesOneHost(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := pgtest.Start(t, pgtest.Options{Replicas: 2})
	dsn := strings.Replace(c.ConnString(""), ":"+c.Password()+"@", ":not-the-password@", 1)
	if dsn == c.ConnString("") {
		t.Fatal("could not replace the password in the connection string")
	}
	_, err := failover.New(ctx, dsn)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
		t.Fatalf("New with a wrong password: want 28P01, got %v", err)
	}
	if errors.Is(err, failover.ErrNoHost) {
		t.Errorf("a wrong password is reported as ErrNoHost: %v", err)
	}
	var he *failover.HostError
	if !errors.As(err, &he) || he.Addr != c.Nodes()[0].Addr() {
		t.Errorf("want the first host named, got %v", err)
	}
	if strings.Contains(err.Error(), "not-the-password") {
		t.Errorf("the password is in the error: %v", err)
	}
	for i, n := range c.Nodes() {
		log, err := os.ReadFile(n.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		failed := strings.Count(string(log), "password authentication failed")
		if want := map[bool]int{true: 1, false: 0}[i == 0]; failed != want {
			t.Errorf("%s logged %d failed authentications, want %d", n, failed, want)
		}
	}
}

// TestWrongPasswordPassesOverADownHost: a host that cannot be reached
// settles nothing, so the next one is asked, and its refusal ends New
// before the last host sees the password.
func TestWrongPasswordPassesOverADownHost(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := pgtest.Start(t, pgtest.Options{Replicas: 2})
	nodes := c.Nodes()
	if err := nodes[0].Stop(ctx, pgtest.Fast); err != nil {
		t.Fatal(err)
	}
	dsn := strings.Replace(c.ConnString(""), ":"+c.Password()+"@", ":not-the-password@", 1)
	_, err := failover.New(ctx, dsn)
	var he *failover.HostError
	var pgErr *pgconn.PgError
	if !errors.As(err, &he) || he.Addr != nodes[1].Addr() || !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
		t.Fatalf("want the 28P01 of %s, got %v", nodes[1].Addr(), err)
	}
	log, err := os.ReadFile(nodes[2].LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "password authentication failed"); n != 0 {
		t.Errorf("%s logged %d failed authentications, want 0", nodes[2], n)
	}
}

// TestSlowLoginKeepsItsTurn: a first host whose server has asked for the
// password but takes its time to refuse it (a loaded machine, a slow
// authentication backend) is slow, not gone, so New waits for its answer
// and the second host never sees the password. The first host is a fake
// server that answers only once the second host is dialled or 3 s have
// passed, well past the 500 ms after which a silent host passes its turn.
func TestSlowLoginKeepsItsTurn(t *testing.T) {
	ctx := testContext(t)
	second, dialled := countingListener(t)
	first := slowRefusal(t, dialled)
	_, err := failover.New(ctx, "postgres://app:not-the-password@"+first+","+second+"/app?sslmode=disable&connect_timeout=10")
	var he *failover.HostError
	var pgErr *pgconn.PgError
	if !errors.As(err, &he) || he.Addr != first || !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
		t.Errorf("want the 28P01 of %s, got %v", first, err)
	}
	select {
	case <-dialled:
		t.Errorf("the second host was dialled while the first was logging in")
	default:
	}
}

// countingListener listens on loopback and closes the returned channel
// when the first connection comes. It holds every connection open, silent,
// until the test ends.
func countingListener(t *testing.T) (addr string, dialled chan struct{}) {
	dialled = make(chan struct{})
	var once sync.Once
	var conns []net.Conn
	t.Cleanup(func() { // after serveLoopback's: no connection comes now
		for _, c := range conns {
			c.Close()
		}
	})
	addr = serveLoopback(t, func(c net.Conn) {
		conns = append(conns, c)
		once.Do(func() { close(dialled) })
	})
	return addr, dialled
}

// slowRefusal serves one PostgreSQL login at a time on loopback: it asks
// for a cleartext password, reads it, and refuses it with 28P01 once
// release is closed or 2 s have passed.
func slowRefusal(t *testing.T, release <-chan struct{}) string {
	var served atomic.Int32
	t.Cleanup(func() { // after serveLoopback's: every login served
		if served.Load() == 0 {
			t.Error("the first host was never dialled")
		}
	})
	return serveLoopback(t, func(c net.Conn) {
		served.Add(1)
		refuseSlowly(c, release)
	})
}

// serveLoopback listens on loopback and hands each connection to handle,
// one at a time, until the test ends. It returns the address.
func serveLoopback(t *testing.T, handle func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			handle(c)
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

func refuseSlowly(c net.Conn, release <-chan struct{}) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	be := pgproto3.NewBackend(c, c)
	if _, err := be.ReceiveStartupMessage(); err != nil {
		return
	}
	be.Send(&pgproto3.AuthenticationCleartextPassword{})
	if err := be.Flush(); err != nil {
		return
	}
	be.SetAuthType(pgproto3.AuthTypeCleartextPassword)
	if _, err := be.Receive(); err != nil {
		return
	}
	select {
	case <-release:
	case <-time.After(2 * time.Second):
	}
	be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: `password authentication failed for user "app"`})
	be.Flush()
}
