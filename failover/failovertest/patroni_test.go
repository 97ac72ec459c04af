package failovertest_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// TestPatroni runs writes through the Pool while Patroni switches over,
// loses its leader's server and loses its leader's machine; each fault
// returns the new leader, which accepts writes, and the ledger finds every
// acknowledged write on the last leader exactly once. It is not parallel:
// Patroni's one-second HA loop is timed against the other tests' servers
// on a small machine otherwise.
func TestPatroni(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.StartPatroni(t, failovertest.Replicas(2), failovertest.SyncReplication(),
		failovertest.Zones("a", "b", "c"))
	ms := c.Members()
	if len(ms) != 3 || len(c.APIURLs()) != 3 {
		t.Fatalf("%d members, %d API URLs; want 3", len(ms), len(c.APIURLs()))
	}
	for i, m := range ms {
		if !strings.Contains(c.ConnString(""), m.Addr()) || m.APIURL() != c.APIURLs()[i] || m.Zone() != "abc"[i:i+1] {
			t.Errorf("%v: address, API URL %q or zone %q not as the cluster says", m, m.APIURL(), m.Zone())
		}
	}
	if c.Password() != failovertest.DefaultPassword || !strings.Contains(c.ConnString(""), ":"+c.Password()+"@") {
		t.Errorf("Password() = %q, not the one in ConnString %q", c.Password(), c.ConnString(""))
	}
	for _, m := range ms {
		if log := m.LogTail(64 << 10); !strings.Contains(log, m.Name()) {
			t.Errorf("%v: its log does not name it:\n%s", m, log)
		}
	}
	pool := newPool(t, ctx, c.ConnString("pool_max_conns=4"))
	if _, err := pool.Exec(ctx, "CREATE TABLE t (id bigint); CREATE TABLE w (x int)"); err != nil {
		t.Fatal(err)
	}

	var (
		ledger failovertest.Ledger[int64]
		next   atomic.Int64
		stop   = make(chan struct{})
		wg     sync.WaitGroup
	)
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := next.Add(1)
				_, err := pool.Exec(ctx, "INSERT INTO t VALUES ($1)", id)
				ledger.Record(id, err)
			}
		})
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	writesGoOn := func(what string) {
		t.Helper()
		at := ledger.Count(failovertest.Acknowledged)
		waitUntil(t, time.Minute, "writes "+what, func() bool { return ledger.Count(failovertest.Acknowledged) >= at+20 })
	}
	leads := func(m *failovertest.Member) {
		t.Helper()
		if inRecovery, err := m.InRecovery(ctx); err != nil || inRecovery {
			t.Fatalf("%v, returned as the new leader, is in recovery (%v)", m, err)
		}
		// A write lands on the new leader: a server in recovery refuses
		// it, so the Pool cannot answer from the old one.
		var port string
		if err := pool.QueryRow(ctx, "INSERT INTO w VALUES (1) RETURNING inet_server_port()::text").Scan(&port); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(m.Addr(), ":"+port) {
			t.Errorf("the Pool writes to port %s, the new leader is %v", port, m)
		}
	}
	writesGoOn("before the first fault")

	from, to, err := c.Switchover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if from == to || from == nil || to == nil {
		t.Fatalf("Switchover: from %v to %v", from, to)
	}
	leads(to)
	writesGoOn("after the switchover")
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if inRecovery, err := from.InRecovery(ctx); err != nil || !inRecovery {
		t.Errorf("the old leader %v is not a replica after the switchover (%v)", from, err)
	}

	from, to, err = c.CrashLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if from == to {
		t.Fatalf("CrashLeader: %v still leads", to)
	}
	leads(to)
	writesGoOn("after the leader's server crashed")
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}

	from, to, err = c.LoseLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if from == to {
		t.Fatalf("LoseLeader: %v still leads", to)
	}
	leads(to)
	writesGoOn("after the leader's machine was lost")
	if err := c.Restart(ctx, from); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if leader, err := c.Leader(ctx); err != nil || leader != to {
		t.Errorf("Leader() = %v, %v; want %v", leader, err, to)
	}

	close(stop)
	wg.Wait()
	v, err := ledger.Check(ctx, to, "t", "id")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("writes: %v", v)
}

// TestPatroniOptions: the options a Patroni cluster cannot take fail
// NewPatroni at once, naming them.
func TestPatroniOptions(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := failovertest.NewPatroni(ctx, failovertest.TLS(), failovertest.Proxies(), failovertest.Replicas(1))
	if err == nil {
		c.Close()
		t.Fatal("NewPatroni accepted TLS and Proxies")
	}
	for _, want := range []string{"TLS", "Proxies", "not available with Patroni"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
}
