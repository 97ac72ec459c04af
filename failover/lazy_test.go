package failover_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// TestLazyConnectStartsBeforeTheDatabase: with lazy_connect=on, New
// succeeds while no server runs, as pgxpool's does; a call with a short
// deadline ends with ErrBudgetExhausted; a call made before the server
// starts waits for it and succeeds.
func TestLazyConnectStartsBeforeTheDatabase(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	n := c.Primary()
	if err := n.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	pool, err := failover.New(ctx, c.ConnString("lazy_connect=on&failover_max_duration=60s"))
	if err != nil {
		t.Fatalf("New with lazy_connect=on and no server: %v", err)
	}
	defer pool.Close()

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = pool.Exec(short, "SELECT 1")
	cancel()
	if !errors.Is(err, failover.ErrBudgetExhausted) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call before the server runs: %v; want ErrBudgetExhausted and the deadline", err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, "CREATE TABLE lazy_started (id int)")
		done <- err
	}()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the call that waited for the server: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the call that waited for the server never returned")
	}
}

// TestLazyConnectWrongPassword: with lazy_connect=on a refused password is
// the first call's error, at once, and names no password.
func TestLazyConnectWrongPassword(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	const wrong = "wrong-password-4242"
	dsn := strings.Replace(c.ConnString("lazy_connect=on"), c.Password(), wrong, 1)
	pool, err := failover.New(ctx, dsn)
	if err != nil {
		t.Fatalf("New with lazy_connect=on: %v", err)
	}
	defer pool.Close()
	_, err = pool.Exec(ctx, "SELECT 1")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
		t.Fatalf("first call: %v; want the server's 28P01", err)
	}
	if strings.Contains(err.Error(), wrong) {
		t.Errorf("error leaks the password: %v", err)
	}
}
