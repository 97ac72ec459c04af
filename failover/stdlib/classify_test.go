package stdlib

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover"
)

func TestClassify(t *testing.T) {
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
		want       error
	}{
		{"write cut by EOF", false, false, insert, eof, failover.ErrCommitOutcomeUnknown},
		{"write answered by a terminate", false, false, insert, terminated, failover.ErrCommitOutcomeUnknown},
		{"write the caller gave up on", true, false, insert, context.Canceled, failover.ErrCommitOutcomeUnknown},
		{"write refused by the server", false, false, insert, unique, nil},
		{"write refused by the server, caller gone", true, false, insert, unique, nil},
		{"write refused by a standby", false, false, insert, readOnly, nil},
		{"read cut", false, false, sel, eof, nil},
		{"unknown text cut", false, false, "SELECT f(); DELETE FROM t", eof, failover.ErrCommitOutcomeUnknown},
		{"statement in a transaction cut", false, true, insert, eof, failover.ErrTxInterrupted},
		{"read in a transaction cut", false, true, sel, terminated, failover.ErrTxInterrupted},
		{"statement in a transaction refused", false, true, insert, unique, nil},
		{"COMMIT sent as a statement cut", false, true, "COMMIT", eof, failover.ErrCommitOutcomeUnknown},
		{"BEGIN and a write in one text cut", false, false, "BEGIN; INSERT INTO t VALUES (1); COMMIT", eof, failover.ErrCommitOutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.callerDone, tc.inTx, tc.query, tc.err); !errors.Is(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Errorf("classify = %v, want %v", got, tc.want)
			}
		})
	}
}
