package stdlib

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/outcome"
)

// TestStatementPhase: what the driver tells outcome.Decide of a failed
// statement, and the verdict that follows, for the statements database/sql
// sends.
func TestStatementPhase(t *testing.T) {
	eof := fmt.Errorf("read: %w", io.ErrUnexpectedEOF)
	terminated := &pgconn.PgError{Severity: "FATAL", Code: "57P01"}
	unique := &pgconn.PgError{Severity: "ERROR", Code: "23505"}
	readOnly := &pgconn.PgError{Severity: "ERROR", Code: "25006"}
	const insert, sel = "INSERT INTO t VALUES (1)", "SELECT x FROM t"
	for _, tc := range []struct {
		name       string
		callerDone bool
		inTx       bool
		query      string
		err        error
		want       outcome.Verdict
	}{
		{"write cut by EOF", false, false, insert, eof, outcome.FailUnknown},
		{"write answered by a terminate", false, false, insert, terminated, outcome.FailUnknown},
		{"write the caller gave up on", true, false, insert, context.Canceled, outcome.FailUnknown},
		{"write refused by the server", false, false, insert, unique, outcome.PassThrough},
		{"write refused by the server, caller gone", true, false, insert, unique, outcome.PassThrough},
		{"write refused by a standby", false, false, insert, readOnly, outcome.PassThrough},
		{"read cut", false, false, sel, eof, outcome.PassThrough},
		{"unknown text cut", false, false, "SELECT f(); DELETE FROM t", eof, outcome.FailUnknown},
		{"statement in a transaction cut", false, true, insert, eof, outcome.FailInterrupted},
		{"read in a transaction cut", false, true, sel, terminated, outcome.FailInterrupted},
		{"statement in a transaction refused", false, true, insert, unique, outcome.PassThrough},
		{"statement in a transaction past the caller's deadline", true, true, insert, context.DeadlineExceeded, outcome.PassThrough},
		{"COMMIT sent as a statement cut", false, true, "COMMIT", eof, outcome.FailUnknown},
		{"BEGIN and a write in one text cut", false, false, "BEGIN; INSERT INTO t VALUES (1); COMMIT", eof, outcome.FailUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			phase, rule := statementPhase(tc.inTx, tc.query)
			f, _ := outcome.Describe(tc.err, phase, rule, hosthealth.TargetPrimary)
			f.CallerDone = tc.callerDone
			if got := outcome.Decide(f).Verdict; got != tc.want {
				t.Errorf("verdict = %v, want %v", got, tc.want)
			}
		})
	}
}
