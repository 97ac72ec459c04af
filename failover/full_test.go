package failover_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
)

// TestFullServerIsNotDown: the primary has no session slot left (SQLSTATE
// 53300 to every new connection) while the Pool's one connection is in
// use, so its probe, which rode on it, must log in and is refused. The
// host stays usable: the connection it has works on, and a call made
// when it comes back runs at once instead of waiting for a primary.
func TestFullServerIsNotDown(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Setting("max_connections", "8"), failovertest.Setting("superuser_reserved_connections", "0"))
	primary := c.Primary()
	pool := newPool(t, ctx, c.ConnStringFor([]*failovertest.Node{primary}, "pool_max_conns=1&health_probe_interval=100ms&application_name=fulltest"))
	if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	// The probe rides on the calls' idle connection: its own is closed,
	// and the Pool holds one session on the server.
	waitUntil(t, 10*time.Second, "the Pool's one session on the primary", func() bool {
		var n int
		rows, err := primary.Query(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'fulltest'`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
		}
		rows.Close()
		return n == 1
	})
	probes := func() int64 { return hostStat(t, pool, primary.Addr()).Probes }

	// The server full, then the Pool's one connection in use: the probe
	// has nothing to ride on, and its own login is refused.
	var filler []*pgx.Conn
	defer func() {
		for _, conn := range filler {
			conn.Close(context.Background())
		}
	}()
	for {
		conn, err := primary.Connect(ctx)
		if err != nil {
			if pgErr, ok := errors.AsType[*pgconn.PgError](err); !ok || pgErr.Code != "53300" {
				t.Fatalf("filling the server: %v", err)
			}
			break
		}
		filler = append(filler, conn)
		if len(filler) > 20 {
			t.Fatal("the server took 20 more connections; max_connections did not apply")
		}
	}
	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := probes()
	waitUntil(t, 10*time.Second, "probes refused by the full server", func() bool { return probes() >= start+3 })
	if st := hostStat(t, pool, primary.Addr()); st.State != hosthealth.Healthy || st.Role != hosthealth.RolePrimary {
		t.Errorf("the full primary is %v/%v, want healthy/primary: full is not down", st.State, st.Role)
	}
	held.Release()
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := pool.Exec(callCtx, "SELECT 1"); err != nil {
		t.Errorf("a call on the full primary's free connection: %v", err)
	}
}
