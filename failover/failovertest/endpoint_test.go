package failovertest_test

import (
	"context"
	"maps"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// serverPort returns the port of the server conn reached.
func serverPort(t *testing.T, ctx context.Context, conn *pgx.Conn) int {
	t.Helper()
	var port int
	if err := conn.QueryRow(ctx, "SELECT inet_server_port()").Scan(&port); err != nil {
		t.Fatal(err)
	}
	return port
}

// connectTo connects through ep; the connection is closed when the test
// ends.
func connectTo(t *testing.T, ctx context.Context, ep *failovertest.Endpoint) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, ep.ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestEndpoint: a writer endpoint leads new connections to the node it
// was moved to while open ones stay where they are, Cut ends the open
// ones, and a reader endpoint takes its nodes in turn.
func TestEndpoint(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(1))
	primary, replica := c.Primary(), c.Replicas()[0]

	ep, err := c.Endpoint(primary)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := pgx.ParseConfig(ep.ConnString("application_name=ep")); err != nil {
		t.Fatal(err)
	} else if got := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))); got != ep.Addr() || len(cfg.Fallbacks) != 0 {
		t.Errorf("ConnString names %s and %d fallbacks, want the endpoint %s alone", got, len(cfg.Fallbacks), ep.Addr())
	} else if cfg.RuntimeParams["application_name"] != "ep" {
		t.Errorf("ConnString lost its params: %v", cfg.RuntimeParams)
	}

	old := connectTo(t, ctx, ep)
	if got := serverPort(t, ctx, old); got != primary.Port() {
		t.Fatalf("through the endpoint to the primary: port %d, want %d", got, primary.Port())
	}

	ep.MoveTo(replica)
	moved := connectTo(t, ctx, ep)
	if got := serverPort(t, ctx, moved); got != replica.Port() {
		t.Errorf("a new connection after MoveTo(replica): port %d, want %d", got, replica.Port())
	}
	if got := serverPort(t, ctx, old); got != primary.Port() {
		t.Errorf("the connection opened before MoveTo: port %d, want the primary's %d", got, primary.Port())
	}

	ep.Cut()
	if _, err := old.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("a query on a connection the endpoint cut succeeded")
	}
	if got := serverPort(t, ctx, connectTo(t, ctx, ep)); got != replica.Port() {
		t.Errorf("a new connection after Cut: port %d, want the replica's %d", got, replica.Port())
	}
	if err := ep.Close(); err != nil {
		t.Fatal(err)
	}

	reader, err := c.Endpoint(primary, replica)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{primary.Port(), replica.Port(), primary.Port(), replica.Port()} {
		conn := connectTo(t, ctx, reader)
		if got := serverPort(t, ctx, conn); got != want {
			t.Errorf("reader endpoint, connection %d: port %d, want %d", i, got, want)
		}
	}

	if _, err := c.Endpoint(); err == nil {
		t.Error("an endpoint in front of no node started")
	}
	if _, err := c.Endpoint(primary, nil); err == nil {
		t.Error("an endpoint in front of a nil node started")
	}
}

// portThrough connects through ep, returns the port of the server the
// connection reached and closes it.
func portThrough(t *testing.T, ctx context.Context, ep *failovertest.Endpoint) int {
	t.Helper()
	conn, err := pgx.Connect(ctx, ep.ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	return serverPort(t, ctx, conn)
}

// TestPrimaryEndpointFollowsSwitchover: a primary endpoint leads new
// connections to the old primary for its lag after a Switchover, then to
// the new one.
func TestPrimaryEndpointFollowsSwitchover(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(1))
	old := c.Primary()

	const lag = 300 * time.Millisecond
	ep, err := c.PrimaryEndpoint(lag)
	if err != nil {
		t.Fatal(err)
	}
	if got := portThrough(t, ctx, ep); got != old.Port() {
		t.Fatalf("before the switchover: port %d, want the primary's %d", got, old.Port())
	}

	next, err := c.Switchover(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// While the move is pending, before the connection and after it, the
	// connection reached the old primary.
	pending := failovertest.MovePending(ep)
	got := portThrough(t, ctx, ep)
	if pending && failovertest.MovePending(ep) {
		if got != old.Port() {
			t.Errorf("right after the switchover: port %d, want the old primary's %d", got, old.Port())
		}
	} else {
		t.Logf("the endpoint moved before the connection was made: nothing to tell")
	}

	waitUntil(t, 10*time.Second, "a new connection through the endpoint to reach the new primary "+next.Name(), func() bool {
		return portThrough(t, ctx, ep) == next.Port()
	})
}

// TestReplicaEndpointFollowsFailover: a replica endpoint with no lag
// leads new connections to the replicas only, to those left after a
// Failover as soon as it returns, and to the old primary too once it
// rejoins.
func TestReplicaEndpointFollowsFailover(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	old := c.Primary()

	ep, err := c.ReplicaEndpoint(0)
	if err != nil {
		t.Fatal(err)
	}
	// reached connects n times through ep and counts the connections
	// that reached each port.
	reached := func(n int) map[int]int {
		seen := map[int]int{}
		for range n {
			seen[portThrough(t, ctx, ep)]++
		}
		return seen
	}
	// check checks that every connection reached one of nodes, and every
	// node one connection at least.
	check := func(when string, seen map[int]int, nodes []*failovertest.Node) {
		t.Helper()
		want := map[int]int{}
		for _, n := range nodes {
			want[n.Port()] = 0
		}
		for port := range seen {
			if _, ok := want[port]; !ok {
				t.Errorf("%s: a connection reached port %d, want only %v", when, port, slices.Sorted(maps.Keys(want)))
			}
		}
		for port := range want {
			if seen[port] == 0 {
				t.Errorf("%s: no connection reached port %d of %v", when, port, slices.Sorted(maps.Keys(want)))
			}
		}
	}
	check("before the failover", reached(4), c.Replicas())

	next, err := c.Failover(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var left []*failovertest.Node
	for _, n := range c.Replicas() {
		if n != old {
			left = append(left, n)
		}
	}
	if len(left) != 1 || left[0] == next {
		t.Fatalf("after the failover to %v, the replicas but the old primary are %v", next, left)
	}
	check("after the failover", reached(4), left)

	if err := c.Rejoin(ctx, old); err != nil {
		t.Fatal(err)
	}
	check("after the old primary rejoined", reached(4), append(left, old))
}
