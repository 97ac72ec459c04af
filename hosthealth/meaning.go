package hosthealth

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// AuthRefused reports whether err is the server refusing the credentials:
// SQLSTATE 28P01 (invalid_password) or 28000
// (invalid_authorization_specification, which pg_hba.conf's reject and a
// failed certificate or ident check return). Both are Terminal.
func AuthRefused(err error) bool {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pgErr.Code {
		case "28P01", "28000":
			return true
		}
	}
	return false
}

// Unanswered reports whether err, from a probe or a connect, shows a host
// that does not answer: the connect failed and no server spoke (refused,
// no route, no answer within the connect's bound), or a question went
// unanswered until its deadline. Nothing in flight on such a host will be
// answered either. A connection the server ended (a terminated backend, a
// shutdown) does not count: the server spoke, and its other connections
// may be fine.
func Unanswered(err error) bool {
	if Classify(err) != Transport {
		return false
	}
	if _, ok := errors.AsType[*pgconn.PgError](err); ok {
		return false
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	return pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded)
}

// fencingSources are the pg_settings sources through which a server's own
// configuration, rather than the application's role or database, sets
// default_transaction_read_only: a primary fenced read-only by its
// operator.
var fencingSources = [...]string{"configuration file", "command line", "environment variable", "override"}

// FencedBy reports whether a read-only setting whose pg_settings source is
// source comes from the server's own configuration. Such a server refuses
// writes as a standby does, and ranks as one; a setting from any other
// source is the application's choice.
func FencedBy(source string) bool {
	for _, s := range fencingSources {
		if source == s {
			return true
		}
	}
	return false
}

// FencingSourcesSQL returns the sources FencedBy accepts as a
// parenthesized SQL list of string literals, for a query that filters
// pg_settings by source: ('configuration file', 'command line', ...).
func FencingSourcesSQL() string {
	quoted := make([]string, len(fencingSources))
	for i, s := range fencingSources {
		quoted[i] = "'" + s + "'"
	}
	return "(" + strings.Join(quoted, ", ") + ")"
}
