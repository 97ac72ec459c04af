package hosthealth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func pgErr(code string) error {
	return &pgconn.PgError{Severity: "ERROR", Code: code, Message: "m"}
}

func wrap(err error) error { return fmt.Errorf("exec: %w", err) }

func TestClassifyValues(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, NotFailover},
		{"plain error", errors.New("boom"), NotFailover},

		{"canceled", context.Canceled, NotFailover},
		{"wrapped canceled", wrap(context.Canceled), NotFailover},
		{"canceled beats transport", errors.Join(context.Canceled, io.EOF), NotFailover},
		{"deadline", context.DeadlineExceeded, Transport},
		{"wrapped deadline", wrap(context.DeadlineExceeded), Transport},
		{"os deadline", os.ErrDeadlineExceeded, Transport},

		{"role error", &RoleError{Addr: "a:5432", Role: RoleReplica, Target: TargetPrimary}, Topology},
		{"wrapped role error", wrap(wrap(&RoleError{Addr: "a:5432", Role: RolePrimary, Target: TargetReplica})), Topology},
		{"pgconn read-only", wrap(pgconn.ErrReadOnlyConnection), Topology},
		{"pgconn read-write", wrap(pgconn.ErrReadWriteConnection), Topology},
		{"pgconn primary", wrap(pgconn.ErrPrimaryConnection), Topology},
		{"pgconn standby", wrap(pgconn.ErrStandbyConnection), Topology},

		{"28P01 invalid password", pgErr("28P01"), Terminal},
		{"28000 invalid authorization", wrap(pgErr("28000")), Terminal},
		{"3D000 no such database", wrap(pgErr("3D000")), Terminal},
		{"57P04 database dropped", wrap(pgErr("57P04")), Terminal},
		{"42501 after connect", wrap(pgErr("42501")), NotFailover},
		{"25006 read-only transaction", wrap(pgErr("25006")), Topology},
		{"57P03 cannot connect now", wrap(pgErr("57P03")), Transient},
		{"53300 too many connections", wrap(pgErr("53300")), Transient},
		{"53400 configuration limit", wrap(pgErr("53400")), Transient},
		{"57P01 admin shutdown", wrap(pgErr("57P01")), Transport},
		{"57P02 crash shutdown", wrap(pgErr("57P02")), Transport},
		{"08000", pgErr("08000"), Transport},
		{"08003", pgErr("08003"), Transport},
		{"08006", pgErr("08006"), Transport},
		{"08001", pgErr("08001"), Transport},
		{"08004", pgErr("08004"), Transport},
		{"08P01 protocol violation", pgErr("08P01"), Transport},
		{"23505 unique violation", wrap(pgErr("23505")), NotFailover},
		{"42P01 undefined table", wrap(pgErr("42P01")), NotFailover},
		{"40001 serialization failure", wrap(pgErr("40001")), NotFailover},
		{"40P01 deadlock", wrap(pgErr("40P01")), NotFailover},
		{"57014 query canceled", wrap(pgErr("57014")), NotFailover},
		{"22012 division by zero", wrap(pgErr("22012")), NotFailover},
		{"empty code", pgErr(""), NotFailover},
		{"server code beats transport", errors.Join(io.EOF, pgErr("57P03")), Transient},

		{"EOF", io.EOF, Transport},
		{"unexpected EOF", wrap(io.ErrUnexpectedEOF), Transport},
		{"closed pipe", io.ErrClosedPipe, Transport},
		{"net closed", wrap(net.ErrClosed), Transport},
		{"conn closed", wrap(pgconn.ErrConnClosed), Transport},
		{"dial refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, Transport},
		{"read reset", wrap(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), Transport},
		{"dns", &net.DNSError{Err: "no such host", Name: "db-x", IsNotFound: true}, Transport},
		{"ECONNREFUSED", syscall.ECONNREFUSED, Transport},
		{"ECONNRESET", wrap(syscall.ECONNRESET), Transport},
		{"EPIPE", wrap(syscall.EPIPE), Transport},
		{"ETIMEDOUT", syscall.ETIMEDOUT, Transport},
		{"EHOSTUNREACH", syscall.EHOSTUNREACH, Transport},
		{"ENOENT", syscall.ENOENT, NotFailover},
		{"tls record header", wrap(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), Transport},
		{"tls alert", tls.AlertError(40), Transport},
		{"tls verification", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, Transport},
		{"x509 hostname", wrap(x509.HostnameError{Host: "db-a"}), Transport},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestClassifyPgconn classifies errors produced by pgconn itself, talking
// to a fake server on loopback.
func TestClassifyPgconn(t *testing.T) {
	tests := []struct {
		name string
		err  func(t *testing.T) error
		want Class
	}{
		{"connect refused", refusedErr, Transport},
		{"connect 28P01", func(t *testing.T) error { return connectErr(t, serverMode{rejectCode: "28P01"}, "disable") }, Terminal},
		{"connect 28000", func(t *testing.T) error { return connectErr(t, serverMode{rejectCode: "28000"}, "disable") }, Terminal},
		{"connect 3D000", func(t *testing.T) error { return connectErr(t, serverMode{rejectCode: "3D000"}, "disable") }, Terminal},
		{"connect 42501", func(t *testing.T) error { return connectErr(t, serverMode{rejectCode: "42501"}, "disable") }, Terminal},
		{"connect 57P03", func(t *testing.T) error { return connectErr(t, serverMode{rejectCode: "57P03"}, "disable") }, Transient},
		{"connect 53300", func(t *testing.T) error { return connectErr(t, serverMode{rejectCode: "53300"}, "disable") }, Transient},
		{"connect 57P01", func(t *testing.T) error { return connectErr(t, serverMode{rejectCode: "57P01"}, "disable") }, Transport},
		{"connect TLS refused", func(t *testing.T) error { return connectErr(t, serverMode{tls: 'N'}, "require") }, Transport},
		{"connect TLS garbage", func(t *testing.T) error { return connectErr(t, serverMode{tls: 'S'}, "require") }, Transport},

		{"query FATAL 57P01", func(t *testing.T) error { return queryErr(t, "fatal 57P01") }, Transport},
		{"query FATAL 57P02", func(t *testing.T) error { return queryErr(t, "fatal 57P02") }, Transport},
		{"query 25006", func(t *testing.T) error { return queryErr(t, "error 25006") }, Topology},
		{"query 23505", func(t *testing.T) error { return queryErr(t, "error 23505") }, NotFailover},
		{"query 42501", func(t *testing.T) error { return queryErr(t, "error 42501") }, NotFailover},
		{"query dropped", func(t *testing.T) error { return queryErr(t, "drop") }, Transport},
		{"conn closed", closedConnErr, Transport},
		{"conn busy", busyConnErr, NotFailover},
		{"context canceled", func(t *testing.T) error { return ctxErr(t, false) }, NotFailover},
		{"deadline exceeded", func(t *testing.T) error { return ctxErr(t, true) }, Transport},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err(t)
			if got := Classify(err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", err, got, tt.want)
			}
		})
	}
}

func TestClassifyTLSErrorType(t *testing.T) {
	// The TLS failure must be recognised by type, not only through the
	// enclosing ConnectError.
	err := connectErr(t, serverMode{tls: 'S'}, "require")
	var rh tls.RecordHeaderError
	if !errors.As(err, &rh) {
		t.Fatalf("pgconn did not surface a tls.RecordHeaderError: %v", err)
	}
	if !isTransportError(err) {
		t.Errorf("isTransportError(%v) = false", err)
	}
}

func TestDidNotRun(t *testing.T) {
	tests := []struct {
		name string
		err  func(*testing.T) error
		want bool
	}{
		{"refused dial", refusedErr, true},
		{"read-only transaction", func(*testing.T) error { return wrap(pgErr("25006")) }, true},
		{"starting up", func(*testing.T) error { return pgErr("57P03") }, true},
		{"admin shutdown in answer", func(*testing.T) error { return pgErr("57P01") }, false},
		{"unique violation", func(*testing.T) error { return pgErr("23505") }, false},
		{"conn closed while reading", closedConnErr, false},
		{"conn busy", busyConnErr, true},
		{"eof", func(*testing.T) error { return io.ErrUnexpectedEOF }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DidNotRun(tt.err(t)); got != tt.want {
				t.Errorf("DidNotRun = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestConnClosedIsPgconnLockError pins what DidNotRun relies on: after a
// connection died, pgconn reports the next use with its unexported lock
// error type, which claims to be safe to retry and wraps ErrConnClosed. A
// pgx upgrade that renames or reshapes it fails here, loudly, so that the
// reasoning in DidNotRun is checked again.
func TestConnClosedIsPgconnLockError(t *testing.T) {
	err := closedConnErr(t)
	if got := reflect.TypeOf(err).String(); got != "*pgconn.connLockError" {
		t.Fatalf("pgconn's closed-connection error is %s, want *pgconn.connLockError", got)
	}
	if !pgconn.SafeToRetry(err) || !errors.Is(err, pgconn.ErrConnClosed) {
		t.Fatalf("pgconn's closed-connection error: SafeToRetry %v, Is(ErrConnClosed) %v; want both true",
			pgconn.SafeToRetry(err), errors.Is(err, pgconn.ErrConnClosed))
	}
}

func TestRoles(t *testing.T) {
	for in, want := range map[string]Role{"on": RoleReplica, "off": RolePrimary, "": RoleUnknown, "x": RoleUnknown} {
		if got := ReportedRole(in); got != want {
			t.Errorf("ReportedRole(%q) = %v, want %v", in, got, want)
		}
	}
	if RecoveryRole(true) != RoleReplica || RecoveryRole(false) != RolePrimary {
		t.Error("RecoveryRole maps pg_is_in_recovery() wrongly")
	}
}
