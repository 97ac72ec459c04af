package failover_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// placeOrder is the settle pattern of docs/errors.md, as the page shows
// it (internal/doccheck checks that the page's block is this function).
func placeOrder(ctx context.Context, pool *failover.Pool, orderID string, amount int64) error {
	const q = `INSERT INTO orders (id, amount) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`
	_, err := pool.Exec(ctx, q, orderID, amount)
	if !errors.Is(err, failover.ErrCommitOutcomeUnknown) {
		return err // nil: it committed; any other error: it did not
	}
	// It may have committed. Sending it again is safe: the key makes the
	// second insert a no-op if the first one landed.
	if _, resendErr := pool.Exec(ctx, q, orderID, amount); resendErr != nil {
		// Still unknown. Keep both errors, so that errors.Is(err,
		// failover.ErrCommitOutcomeUnknown) still tells the caller so.
		return fmt.Errorf("order %s: %w", orderID, errors.Join(err, resendErr))
	}
	return nil
}

// TestSettlePatternKeepsUnknownOutcome runs placeOrder against a real
// server where the first insert's outcome is unknown and the resend
// fails. The insert commits on the primary and waits for its synchronous
// standby, which is down; the caller gives up meanwhile, so the resend
// fails at once with the caller's context. The caller must still see
// ErrCommitOutcomeUnknown, and it is right to: the order is in the table.
// A Ledger counts it as unknown and committed; had the pattern returned
// the resend's error alone, the Ledger would find a write reported
// failed that committed.
func TestSettlePatternKeepsUnknownOutcome(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(1), failovertest.SyncReplication())
	pool := newPool(t, ctx, c.ConnString(""))
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (id text PRIMARY KEY, amount bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	admin, err := c.Primary().Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)

	// With the synchronous standby down, a commit waits on the primary
	// for it, already written there.
	standby := c.Replicas()[0]
	if err := standby.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	callCtx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	placed := make(chan error, 1)
	go func() { placed <- placeOrder(callCtx, pool, "order-1", 100) }()
	waitUntil(t, 30*time.Second, "the order's commit to wait for the standby", func() bool {
		var waiting bool
		err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE wait_event = 'SyncRep' AND query LIKE 'INSERT INTO orders %')`).Scan(&waiting)
		return err == nil && waiting
	})
	giveUp() // the caller's deadline, with the insert on the wire
	err = <-placed

	if !errors.Is(err, failover.ErrCommitOutcomeUnknown) {
		t.Fatalf("placeOrder = %v; want an error wrapping ErrCommitOutcomeUnknown", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("placeOrder = %v; want the resend's error (context.Canceled) kept too", err)
	}
	var ledger, resendOnly failovertest.Ledger[string]
	if o := ledger.Record("order-1", err); o != failovertest.Unknown {
		t.Errorf("the Ledger counts placeOrder's error as %v, want unknown", o)
	}
	// What the resend alone returns, which the pattern once passed on.
	_, resendErr := pool.Exec(callCtx, `INSERT INTO orders (id, amount) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, "order-1", 100)
	resendOnly.Record("order-1", resendErr)

	// The standby comes back, so nothing waits for it any more: the first
	// insert is in the table, though its caller was told only "unknown".
	if err := standby.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the first insert to be visible", func() bool {
		var n int
		return pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE id = 'order-1'`).Scan(&n) == nil && n == 1
	})
	verdict, err := ledger.Check(ctx, pool, "orders", "id")
	if err != nil {
		t.Fatal(err)
	}
	if verdict.Unknown != 1 || verdict.UnknownCommitted != 1 {
		t.Errorf("verdict %v: want one order of unknown outcome, committed", verdict)
	}
	// The resend's error alone says "did not commit", which is false here.
	if v, err := resendOnly.Check(ctx, pool, "orders", "id"); !errors.Is(err, failovertest.ErrMismatch) || len(v.FailedPresent) != 1 {
		t.Errorf("with the resend's error alone (%v): verdict %v, %v; want the order failed yet present", resendErr, v, err)
	}
}
