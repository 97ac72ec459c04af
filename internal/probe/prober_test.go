package probe

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/netconn"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// TestProbeStatementsForgotten: the probe prepares its statements once per
// connection; when the server no longer has them (a pooler that handed the
// probe another session), the probe is answered all the same, through the
// unnamed statement, and keeps to it on that connection.
func TestProbeStatementsForgotten(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a PostgreSQL server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := pgtest.Start(t, pgtest.Options{})
	cfg, err := pgx.ParseConfig(c.ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	pr := &Prober{Config: cfg, Socks: &netconn.Sockets{}}
	defer pr.Close()
	probe := func(what string) {
		t.Helper()
		r := pr.Run(ctx, clock.Real(), 5*time.Second, 5*time.Second, Plan{})
		if r.Err != nil || r.Role != hosthealth.RolePrimary {
			t.Fatalf("%s: role %v, error %v; want the primary's answer", what, r.Role, r.Err)
		}
	}
	probe("the first probe")
	if !pr.prepared[stmtProbe] || pr.unprepared {
		t.Fatalf("after the first probe: prepared %v, unprepared %v; want the probe's statement prepared", pr.prepared, pr.unprepared)
	}
	if err := pr.conn.Exec(ctx, "DEALLOCATE ALL").Close(); err != nil {
		t.Fatal(err)
	}
	probe("the probe after the server forgot its statement")
	if !pr.unprepared {
		t.Errorf("after the statement was forgotten: unprepared %v, want the unnamed statement from then on", pr.unprepared)
	}
	probe("the probe after that")
}
