package hosthealth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strconv"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Class is what an error means for failover.
type Class uint8

const (
	// NotFailover: not a failover event. An ordinary SQL error, a
	// cancelled context, or an error this package does not recognise (a
	// context deadline is Transport). The host keeps its state and the
	// error goes back to the caller.
	NotFailover Class = iota
	// Terminal: trying other hosts cannot help (bad credentials, no such
	// database, permission denied at connect). Stop and report it.
	Terminal
	// Topology: the server is up but in the wrong role for the target.
	// Demote the host and move on without backing off.
	Topology
	// Transient: the server asked to be tried again later. Record it and
	// move on; the call holds the host back for a backoff before it sends
	// there again.
	Transient
	// Transport: the host could not be reached or the connection broke.
	Transport
)

var classNames = [...]string{
	NotFailover: "not-failover",
	Terminal:    "terminal",
	Topology:    "topology",
	Transient:   "transient",
	Transport:   "transport",
}

// String returns the lower-case, hyphenated name of c.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// RoleError is what a connection check returns when the server's role does
// not satisfy the target. Classify reports it, wrapped or not, as Topology.
type RoleError struct {
	Addr   string // host:port of the server
	Role   Role   // the role the server reported
	Target Target // the target the connection was made for
}

// Error describes the mismatch, for example
// "host 10.0.0.2:5432 is a replica; target read-write needs a primary".
func (e *RoleError) Error() string {
	var is string
	switch e.Role {
	case RolePrimary, RoleReplica:
		is = "is a " + e.Role.String()
	default:
		is = "has an unknown role"
	}
	var needs string
	switch e.Target {
	case TargetPrimary:
		needs = "a primary"
	case TargetReplica:
		needs = "a replica"
	default:
		needs = "a primary or a replica"
	}
	return "host " + e.Addr + " " + is + "; target " + e.Target.String() + " needs " + needs
}

// Classify sorts err into a failover Class. It looks only at Go error types
// and SQLSTATE codes, never at message text. The checks run in this order:
//
//   - nil and context.Canceled (the caller gave up) are NotFailover.
//   - A *RoleError anywhere in the chain is Topology, as are pgconn's own
//     target_session_attrs errors (ErrReadOnlyConnection and friends,
//     *pgconn.NotPreferredError).
//   - A *pgconn.PgError is classified by its SQLSTATE (see below). When the
//     server has spoken, its code wins over whatever else is in the chain.
//   - context.DeadlineExceeded and pgconn timeouts are Transport.
//   - A closed connection (pgconn.ErrConnClosed), io.EOF,
//     io.ErrUnexpectedEOF, io.ErrClosedPipe, net.ErrClosed, any net.Error
//     but a bare syscall.Errno (which covers *net.OpError and
//     *net.DNSError), a bare errno that is connection-level or a timeout,
//     TLS record, alert and certificate errors, and a *pgconn.ConnectError
//     carrying none of the above are Transport.
//   - Anything else is NotFailover. That includes pgconn's "conn busy"
//     error, which is a bug in the caller rather than a fault of the host.
//
// SQLSTATE codes:
//
//	28P01, 28000, 3D000, 57P04              Terminal
//	42501 inside a *pgconn.ConnectError     Terminal (NotFailover after connect)
//	25006                                   Topology
//	57P03, 53300, 53400                     Transient
//	57P01, 57P02, class 08                  Transport
//	everything else                         NotFailover
func Classify(err error) Class {
	if err == nil || errors.Is(err, context.Canceled) {
		return NotFailover
	}
	if _, ok := errors.AsType[*RoleError](err); ok || isPgconnTargetError(err) {
		return Topology
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		return classifyCode(pgErr.Code, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return Transport
	}
	if isTransportError(err) {
		return Transport
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		// A connect that failed without the server sending an error: the
		// dial, the TLS handshake or the startup exchange broke.
		return Transport
	}
	return NotFailover
}

// Full reports whether err is a server's refusal of a new connection for
// lack of slots (SQLSTATE 53300, too_many_connections): the server is up
// and in its role, and its open sessions work on. It is Transient to
// Classify; a host whose connections are open is full, not down (the
// Pool does not count it as a failover event then).
func Full(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pgErr.Code == "53300"
}

// classifyCode maps a SQLSTATE to a Class. err is the whole chain, needed
// to tell a permission error at connect from one at query time.
func classifyCode(code string, err error) Class {
	switch code {
	case "28P01", // invalid_password
		"28000", // invalid_authorization_specification
		"3D000", // invalid_catalog_name: no such database
		"57P04": // database_dropped
		return Terminal
	case "42501": // insufficient_privilege
		// At connect this is a missing CONNECT privilege, which holds on
		// every host of the cluster. At query time it is an ordinary SQL
		// error.
		if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
			return Terminal
		}
		return NotFailover
	case "25006": // read_only_sql_transaction: a write reached a standby
		return Topology
	case "57P03", // cannot_connect_now: starting up, shutting down, recovering
		"53300", // too_many_connections
		"53400": // configuration_limit_exceeded
		return Transient
	case "57P01", // admin_shutdown
		"57P02": // crash_shutdown
		return Transport
	}
	if len(code) == 5 && code[:2] == "08" { // connection_exception class
		return Transport
	}
	return NotFailover
}

// isPgconnTargetError reports whether err comes from one of pgconn's
// target_session_attrs checks, used when a connection string still
// carries that key through to pgconn.
func isPgconnTargetError(err error) bool {
	if _, ok := errors.AsType[*pgconn.NotPreferredError](err); ok {
		return true
	}
	return errors.Is(err, pgconn.ErrReadOnlyConnection) ||
		errors.Is(err, pgconn.ErrReadWriteConnection) ||
		errors.Is(err, pgconn.ErrPrimaryConnection) ||
		errors.Is(err, pgconn.ErrStandbyConnection)
}

// transportErrnos are the socket errors that mean the peer is unreachable
// or the connection is gone. They normally arrive inside a *net.OpError;
// this list catches them when a dialer or wrapper returns them bare.
var transportErrnos = [...]syscall.Errno{
	syscall.ECONNREFUSED,
	syscall.ECONNRESET,
	syscall.ECONNABORTED,
	syscall.EPIPE,
	syscall.ETIMEDOUT,
	syscall.EHOSTUNREACH,
	syscall.ENETUNREACH,
	syscall.ENETDOWN,
	syscall.ENETRESET,
}

// isTransportError reports whether err shows a broken or unreachable
// connection in a way that does not depend on the server having answered.
func isTransportError(err error) bool {
	if errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, net.ErrClosed) {
		return true
	}
	if netErr, ok := errors.AsType[net.Error](err); ok {
		// syscall.Errno satisfies net.Error too, but a bare errno can be
		// anything (ENOENT from opening a certificate file, say); only the
		// connection-level ones count.
		errno, ok := netErr.(syscall.Errno)
		if !ok || errno.Timeout() {
			return true
		}
		for _, e := range transportErrnos {
			if errno == e {
				return true
			}
		}
	}
	return hasType[tls.RecordHeaderError](err) ||
		hasType[tls.AlertError](err) ||
		hasType[*tls.CertificateVerificationError](err) ||
		hasType[*tls.ECHRejectionError](err) ||
		hasType[x509.UnknownAuthorityError](err) ||
		hasType[x509.HostnameError](err) ||
		hasType[x509.CertificateInvalidError](err)
}

// hasType reports whether err's chain holds an error of type E.
func hasType[E error](err error) bool {
	_, ok := errors.AsType[E](err)
	return ok
}

// DidNotRun reports whether err proves that a statement did nothing on the
// server: it never reached the server, or the server refused it before
// running it (25006, a write sent to a read-only server; 57P03, a server
// starting up or shutting down).
//
// pgconn marks some errors safe to retry because nothing was sent. One of
// them is not proof for a pool: pgconn's "conn closed" lock error (an
// unexported type, which wraps pgconn.ErrConnClosed). pgconn returns it for
// a call made on a connection that was already closed, and also when a
// connection failed while the answer to a statement already sent was being
// read: the failed read closes the connection and the next receive finds
// it closed. A pool only sends statements on connections that were open
// when acquired, so for a pool the error means the second case, and the
// statement may have run. DidNotRun recognises it by pgconn.ErrConnClosed,
// never by its text.
//
// A failed connect (*pgconn.ConnectError) did not run anything either: the
// connection never opened for the statement.
func DidNotRun(err error) bool {
	if pgconn.SafeToRetry(err) && !errors.Is(err, pgconn.ErrConnClosed) {
		return true
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pgErr.Code {
		case "25006", // read_only_sql_transaction
			"57P03": // cannot_connect_now
			return true
		}
	}
	return false
}

// ReportedRole returns the role of a server as its in_hot_standby parameter
// status says ("on" for a standby, "off" for a primary; PostgreSQL 14 and
// later report it at connect and whenever it changes, in the answer to the
// session's next statement). It returns RoleUnknown for any other value,
// including "" from an older server, which must be asked with
// pg_is_in_recovery().
func ReportedRole(inHotStandby string) Role {
	switch inHotStandby {
	case "on":
		return RoleReplica
	case "off":
		return RolePrimary
	}
	return RoleUnknown
}

// RecoveryRole returns the role of a server whose pg_is_in_recovery() is
// inRecovery.
func RecoveryRole(inRecovery bool) Role {
	if inRecovery {
		return RoleReplica
	}
	return RolePrimary
}
