package failovertest_test

import (
	"context"
	"net"
	"strconv"
	"testing"

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
