package failovertest_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// A program (not a test) starts a cluster with New and closes it itself;
// a test uses Start, which does both. The Pool finds the promoted replica
// by itself.
func Example() {
	ctx := context.Background()
	cluster, err := failovertest.New(ctx, failovertest.Replicas(2), failovertest.SyncReplication())
	if err != nil {
		log.Fatal(err) // names the command that installs PostgreSQL when it is missing
	}
	defer cluster.Close()

	pool, err := failover.New(ctx, cluster.ConnString("pool_max_conns=4"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
		log.Fatal(err)
	}

	promoted, err := cluster.Failover(ctx, 100*time.Millisecond)
	if err != nil {
		log.Fatal(err)
	}
	var node string
	if err := pool.QueryRow(ctx, "INSERT INTO t VALUES (1) RETURNING current_setting('cluster_name')").Scan(&node); err != nil {
		log.Fatal(err)
	}
	fmt.Println(node == promoted.Name())
}

// Failover's gap is the scenario: calls made while no primary exists wait
// for the promotion, up to the Pool's failover_max_duration, or fail.
func ExampleCluster_Failover() {
	ctx := context.Background()
	cluster, err := failovertest.New(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	pool, err := failover.New(ctx, cluster.ConnString("failover_max_duration=2s"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	done := make(chan error, 1)
	go func() {
		_, err := cluster.Failover(ctx, 5*time.Second) // longer than the calls may wait
		done <- err
	}()
	// Until the promotion, writes fail with failover.ErrNoHost or
	// ErrBudgetExhausted: never sent, so certainly not committed.
	for failovertest.WriteResultOf(pool.Ping(ctx)) == failovertest.Acknowledged {
		time.Sleep(10 * time.Millisecond)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Println(pool.Ping(ctx))
}

// The ledger is filled by the load and checked after the drill. A write
// of unknown outcome may be in the table or not; either is correct, and
// the verdict counts those that committed.
func ExampleLedger() {
	ctx := context.Background()
	cluster, err := failovertest.New(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	pool, err := failover.New(ctx, cluster.ConnString(""))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE events (id bigint PRIMARY KEY)"); err != nil {
		log.Fatal(err)
	}

	var ledger failovertest.Ledger[int64]
	stop := make(chan struct{})
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		for id := int64(1); ; id++ {
			select {
			case <-stop:
				return
			default:
			}
			_, err := pool.Exec(ctx, "INSERT INTO events VALUES ($1)", id)
			ledger.Record(id, err)
		}
	}()
	primary, err := cluster.Failover(ctx, 200*time.Millisecond)
	if err != nil {
		log.Fatal(err)
	}
	close(stop)
	<-loaded

	verdict, err := ledger.Check(ctx, primary, "events", "id")
	if err != nil {
		// Wraps ErrMismatch and names the keys lost, applied twice, or
		// failed yet present; or says why the table could not be read.
		log.Fatal(err)
	}
	fmt.Println(verdict.OK())
}

// WriteResultOf is how a Ledger reads a write's error.
func ExampleWriteResultOf() {
	fmt.Println(failovertest.WriteResultOf(nil))
	fmt.Println(failovertest.WriteResultOf(fmt.Errorf("placing order: %w", failover.ErrCommitOutcomeUnknown)))
	fmt.Println(failovertest.WriteResultOf(failover.ErrNoHost))
	// Output:
	// acknowledged
	// unknown
	// failed
}

// A frozen primary answers nothing: the Pool's probes time out
// (health_probe_timeout) and its calls move on only once a replica is
// promoted, or fail.
func ExampleNode_Freeze() {
	ctx := context.Background()
	cluster, err := failovertest.New(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	old := cluster.Primary()
	if err := old.Freeze(); err != nil {
		log.Fatal(err)
	}
	// The frozen primary still holds its role: stop it before promoting, or
	// there are two primaries once it thaws.
	if err := old.Crash(ctx); err != nil { // thaws it first
		log.Fatal(err)
	}
	if err := cluster.Promote(ctx, cluster.Replicas()[0]); err != nil {
		log.Fatal(err)
	}
	fmt.Println(cluster.Primary() != old)
}

// A network partition between the application and the primary: the
// server runs on, but nothing reaches it. The Pool judges it silent after
// health_probe_timeout; here a replica is promoted and the old primary,
// still unreachable, is stopped, as a failover manager fences it.
func ExampleNode_SetBlackhole() {
	ctx := context.Background()
	cluster, err := failovertest.New(ctx, failovertest.Proxies())
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	pool, err := failover.New(ctx, cluster.ConnString("health_probe_timeout=1s"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	old := cluster.Primary()
	if err := old.SetBlackhole(true); err != nil {
		log.Fatal(err)
	}
	if err := old.Crash(ctx); err != nil {
		log.Fatal(err)
	}
	if err := cluster.Promote(ctx, cluster.Replicas()[0]); err != nil {
		log.Fatal(err)
	}
	var node string
	if err := pool.QueryRow(ctx, "SHOW cluster_name").Scan(&node); err != nil {
		log.Fatal(err)
	}
	fmt.Println(node == cluster.Primary().Name())
}
