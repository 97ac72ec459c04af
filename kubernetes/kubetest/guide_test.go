package kubetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/kubernetes"
	"github.com/pgfailover/pgfailover/kubernetes/kubetest"
)

// TestOrdersOnKubernetes is the test docs/kubernetes.md shows a service
// writing: the harness, a Pool from its connection string, a switchover
// as CloudNativePG does it, and the writes after it.
func TestOrdersOnKubernetes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := kubetest.Start(t, kubetest.PostgreSQL(failovertest.Replicas(2)))
	dsn, err := c.ConnString("")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := kubernetes.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	move, err := c.Switchover(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO orders VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var port int
	if err := pool.QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port); err != nil {
		t.Fatal(err)
	}
	if port != move.To.Port() {
		t.Errorf("the write went to port %d, want the new primary's %d", port, move.To.Port())
	}
	t.Logf("announced %s, writable %v later, labelled %v later", c.Pod(move.To),
		move.Writable.Sub(move.Announced), move.Labelled.Sub(move.Announced))
}
