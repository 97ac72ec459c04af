package failover

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestPgxExplanation checks that what pgx's parser says survives without
// the connection string it quotes, with and without a cause.
func TestPgxExplanation(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		err  error
		want string
	}{
		{"invalid port", nil, "invalid port"},
		{"failed to parse as DSN", errors.New("unexpected end"), "failed to parse as DSN (unexpected end)"},
	} {
		e := pgconn.NewParseConfigError("", tc.msg, tc.err).(*pgconn.ParseConfigError)
		if got := pgxExplanation(e); got != tc.want {
			t.Errorf("pgxExplanation(%q, %v) = %q, want %q", tc.msg, tc.err, got, tc.want)
		}
	}
}
