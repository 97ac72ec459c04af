package failovertest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// Orders is the service under test. It stores each order once, under the
// idempotency key its client sent, and reads it back through the Reader.
type Orders struct {
	DB *failover.Pool
}

// Place stores an order. A write whose commit outcome is unknown (the
// primary died while it was in flight) is sent again: the idempotency key
// makes that safe, and the second send either stores the order or finds
// it there. When the second send fails too, the outcome is still unknown:
// the error wraps both, so that it still wraps ErrCommitOutcomeUnknown.
func (o *Orders) Place(ctx context.Context, key string, amount int64) error {
	const insert = `INSERT INTO orders (key, amount) VALUES ($1, $2)
		ON CONFLICT (key) DO NOTHING`
	_, err := o.DB.Exec(ctx, insert, key, amount)
	if !errors.Is(err, failover.ErrCommitOutcomeUnknown) {
		return err
	}
	if _, resendErr := o.DB.Exec(ctx, insert, key, amount); resendErr != nil {
		return fmt.Errorf("order %s: %w", key, errors.Join(err, resendErr))
	}
	return nil
}

// Amount reads an order back through the Reader: from a replica that has
// replayed the caller's last write, else from the primary.
func (o *Orders) Amount(ctx context.Context, key string) (int64, error) {
	var amount int64
	err := o.DB.Reader().QueryRow(ctx, "SELECT amount FROM orders WHERE key = $1", key).Scan(&amount)
	return amount, err
}

// TestOrdersSurviveFailover places orders from four clients while the
// primary crashes and a replica is promoted 500 ms later. Every order the
// service acknowledged must be stored exactly once and be readable right
// after it was placed.
func TestOrdersSurviveFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster := failovertest.Start(t, failovertest.Replicas(2), failovertest.SyncReplication())
	pool, err := failover.New(ctx, cluster.ConnString(""))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (key text PRIMARY KEY, amount bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	svc := &Orders{DB: pool}

	var (
		ledger  failovertest.Ledger[string]
		next    atomic.Int64
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		mu      sync.Mutex // guards unread
		unread  []string   // acknowledged orders a read right after did not find
		placing = func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := next.Add(1)
				key := fmt.Sprintf("order-%d", n)
				err := svc.Place(ctx, key, n)
				if ledger.Record(key, err) != failovertest.Acknowledged {
					continue
				}
				if _, err := svc.Amount(ctx, key); errors.Is(err, pgx.ErrNoRows) {
					mu.Lock()
					unread = append(unread, key)
					mu.Unlock()
				}
			}
		}
	)
	for range 4 {
		wg.Go(placing)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("orders before the failover", func() bool { return ledger.Count(failovertest.Acknowledged) >= 100 })

	primary, err := cluster.Failover(ctx, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	after := ledger.Count(failovertest.Acknowledged)
	waitFor("orders after the failover", func() bool { return ledger.Count(failovertest.Acknowledged) >= after+100 })
	close(stop)
	wg.Wait()

	verdict, err := ledger.Check(ctx, primary, "orders", "key")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s promoted; orders: %v", primary, verdict)
	if len(unread) > 0 {
		t.Errorf("%d acknowledged orders were not found by a read right after: %v", len(unread), unread)
	}
}
