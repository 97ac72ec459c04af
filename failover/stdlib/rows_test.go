package stdlib_test

import (
	"errors"
	"testing"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/failover/stdlib"
)

// TestRowsCutMidResult: a session terminated while its rows are being
// read ends them with an error: for a write (INSERT … RETURNING), a
// HostError naming the host and wrapping ErrCommitOutcomeUnknown; for a
// read, pgx's own.
// The failure is met while database/sql reads the next row, which it does
// through the driver's Next before Go 1.27 and NextRow from Go 1.27 on.
func TestRowsCutMidResult(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	db := openDB(t, ctx, c.ConnString(""))
	admin := connect(t, ctx, c.Primary())
	if _, err := db.ExecContext(ctx, "CREATE TABLE cutrows (id int)"); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name, query string
		write       bool
	}{
		// Results of some 30 MB, several times what the socket buffers on
		// the way hold, so that they are still streaming when the session
		// is terminated.
		{"read", "SELECT g FROM generate_series(1, 2000000) g", false},
		{"write", "INSERT INTO cutrows SELECT g FROM generate_series(1, 300000) g RETURNING id, repeat('x', 100)", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var pid uint32
			if err := conn.Raw(func(dc any) error {
				pid = dc.(*stdlib.Conn).Conn().PgConn().PID()
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			rows, err := conn.QueryContext(ctx, tt.query)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				if n++; n == 1 {
					var ok bool
					if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
						t.Fatalf("terminating backend %d: %v, %v", pid, ok, err)
					}
				}
			}
			err = rows.Err()
			t.Logf("%d rows, then %v", n, err)
			if err == nil {
				t.Fatalf("the rows of a terminated session ended without an error after %d rows", n)
			}
			var he *failover.HostError
			isHostErr := errors.As(err, &he)
			unknown := errors.Is(err, failover.ErrCommitOutcomeUnknown)
			switch {
			case tt.write && (!isHostErr || he.Addr != c.Primary().Addr() || !unknown):
				t.Errorf("a write's rows ended with %v; want a HostError naming %s wrapping ErrCommitOutcomeUnknown", err, c.Primary().Addr())
			case !tt.write && (isHostErr || unknown):
				t.Errorf("a read's rows ended with %v; want pgx's error", err)
			}
		})
	}
}
