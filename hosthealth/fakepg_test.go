package hosthealth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// fakeServer is a minimal PostgreSQL wire-protocol server on loopback. It
// exists so that the Classify tests can use error values produced by pgconn
// itself (a *pgconn.ConnectError wrapping a server error, a closed
// connection, a TLS failure) rather than hand-built look-alikes.
type fakeServer struct {
	ln   net.Listener
	mode serverMode
	wg   sync.WaitGroup
	mu   sync.Mutex // guards conns; no I/O while held
	conn []net.Conn
}

type serverMode struct {
	rejectCode string // if set, answer the startup message with FATAL rejectCode
	tls        byte   // answer to an SSLRequest: 'N' refuses; 'S' accepts, then sends garbage
}

// startFakeServer listens on 127.0.0.1 and serves until the test ends.
//
// After a successful startup it answers each simple Query by its text:
// "fatal CODE" sends a FATAL error and closes the connection, "error CODE"
// sends an ERROR and stays ready, "drop" closes the socket without a word,
// and anything else completes as an empty SELECT.
func startFakeServer(t *testing.T, mode serverMode) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{ln: ln, mode: mode}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conn {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return ln.Addr().String()
}

func (s *fakeServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conn = append(s.conn, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			s.serve(c)
		}()
	}
}

func (s *fakeServer) serve(c net.Conn) {
	be := pgproto3.NewBackend(c, c)
	for {
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			return
		}
		switch msg.(type) {
		case *pgproto3.SSLRequest:
			answer := s.mode.tls
			if answer == 0 {
				answer = 'N'
			}
			if _, err := c.Write([]byte{answer}); err != nil {
				return
			}
			if answer == 'S' {
				// Not a TLS record: the client's handshake fails.
				_, _ = c.Write([]byte("this is not a TLS server hello\n"))
				return
			}
			continue
		case *pgproto3.GSSEncRequest:
			if _, err := c.Write([]byte{'N'}); err != nil {
				return
			}
			continue
		case *pgproto3.StartupMessage:
		default:
			return
		}
		break
	}

	if s.mode.rejectCode != "" {
		be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: s.mode.rejectCode, Message: "rejected by the fake server"})
		_ = be.Flush()
		return
	}
	be.Send(&pgproto3.AuthenticationOk{})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if be.Flush() != nil {
		return
	}
	for {
		msg, err := be.Receive()
		if err != nil {
			return
		}
		q, ok := msg.(*pgproto3.Query)
		if !ok {
			return // Terminate or anything unexpected
		}
		verb, code, _ := strings.Cut(q.String, " ")
		switch verb {
		case "fatal":
			be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: code, Message: "fatal from the fake server"})
			_ = be.Flush()
			return
		case "error":
			be.Send(&pgproto3.ErrorResponse{Severity: "ERROR", Code: code, Message: "error from the fake server"})
		case "drop":
			return
		default:
			be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")})
		}
		be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		if be.Flush() != nil {
			return
		}
	}
}

func connString(addr, sslmode string) string {
	return fmt.Sprintf("postgres://app@%s/app?sslmode=%s&connect_timeout=10", addr, sslmode)
}

// connectErr connects to a fake server in mode and returns pgconn's error.
func connectErr(t *testing.T, mode serverMode, sslmode string) error {
	t.Helper()
	addr := startFakeServer(t, mode)
	conn, err := pgconn.Connect(context.Background(), connString(addr, sslmode))
	if err == nil {
		conn.Close(context.Background())
		t.Fatalf("connect to fake server in mode %+v: want an error", mode)
	}
	return err
}

// readyConn connects to a fake server that accepts the connection.
func readyConn(t *testing.T) *pgconn.PgConn {
	t.Helper()
	addr := startFakeServer(t, serverMode{})
	conn, err := pgconn.Connect(context.Background(), connString(addr, "disable"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// queryErr runs sql on a fresh connection and returns the error.
func queryErr(t *testing.T, sql string) error {
	t.Helper()
	conn := readyConn(t)
	_, err := conn.Exec(context.Background(), sql).ReadAll()
	if err == nil {
		t.Fatalf("query %q: want an error", sql)
	}
	return err
}

// refusedErr dials a loopback port that nothing listens on.
func refusedErr(t *testing.T) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	conn, err := pgconn.Connect(context.Background(), connString(addr, "disable"))
	if err == nil {
		conn.Close(context.Background())
		t.Fatal("connect to a closed port: want an error")
	}
	return err
}

// closedConnErr uses a connection after the server ended it with FATAL.
func closedConnErr(t *testing.T) error {
	t.Helper()
	conn := readyConn(t)
	if _, err := conn.Exec(context.Background(), "fatal 57P01").ReadAll(); err == nil {
		t.Fatal("want the FATAL error")
	}
	_, err := conn.Exec(context.Background(), "select 1").ReadAll()
	if err == nil {
		t.Fatal("query on a closed connection: want an error")
	}
	if !errors.Is(err, pgconn.ErrConnClosed) {
		t.Fatalf("want pgconn.ErrConnClosed, got %v", err)
	}
	return err
}

// busyConnErr starts a second query while the first one's results are
// still unread.
func busyConnErr(t *testing.T) error {
	t.Helper()
	conn := readyConn(t)
	first := conn.Exec(context.Background(), "select 1")
	_, err := conn.Exec(context.Background(), "select 2").ReadAll()
	if _, ferr := first.ReadAll(); ferr != nil {
		t.Fatal(ferr)
	}
	if err == nil {
		t.Fatal("want a conn busy error")
	}
	if errors.Is(err, pgconn.ErrConnClosed) || !pgconn.SafeToRetry(err) {
		t.Fatalf("want pgconn's lock error, got %v", err)
	}
	return err
}

// ctxErr runs a query under a context that is already done.
func ctxErr(t *testing.T, deadline bool) error {
	t.Helper()
	conn := readyConn(t)
	var ctx context.Context
	var cancel context.CancelFunc
	if deadline {
		ctx, cancel = context.WithDeadline(context.Background(), time.Unix(0, 0))
	} else {
		ctx, cancel = context.WithCancel(context.Background())
		cancel()
	}
	defer cancel()
	_, err := conn.Exec(ctx, "select 1").ReadAll()
	if err == nil {
		t.Fatal("want a context error")
	}
	return err
}
