package failovertest_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// TestLedgerCheckFindsLostWrites checks a real table: it agrees with the
// ledger until an acknowledged row is deleted, a row is doubled, or a
// write reported as failed is found; then Check fails naming the key.
func TestLedgerCheckFindsLostWrites(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	pool := newPool(t, ctx, c.ConnString(""))
	// No unique key: the table itself would let a write be applied twice.
	if _, err := pool.Exec(ctx, `CREATE SCHEMA app; CREATE TABLE app."Orders" ("Key" bigint, amount int)`); err != nil {
		t.Fatal(err)
	}
	var ledger failovertest.Ledger[int64]
	for k := int64(1); k <= 20; k++ {
		_, err := pool.Exec(ctx, `INSERT INTO app."Orders" VALUES ($1, 1)`, k)
		ledger.Record(k, err)
	}
	// A write of unknown outcome that did commit, one that did not, and a
	// write that failed.
	if _, err := pool.Exec(ctx, `INSERT INTO app."Orders" VALUES (21, 1)`); err != nil {
		t.Fatal(err)
	}
	ledger.Record(21, failover.ErrCommitOutcomeUnknown)
	ledger.Record(22, failover.ErrCommitOutcomeUnknown)
	ledger.Record(23, failover.ErrNoHost)
	// A row no write of the ledger made.
	if _, err := pool.Exec(ctx, `INSERT INTO app."Orders" VALUES (1000, 1)`); err != nil {
		t.Fatal(err)
	}

	check := func() (failovertest.Tally[int64], error) {
		t.Helper()
		return ledger.Check(ctx, c.Primary(), `app.Orders`, "Key")
	}
	v, err := check()
	if err != nil {
		t.Fatalf("the table agrees with the ledger, yet: %v", err)
	}
	if v.Acknowledged != 20 || v.Unknown != 2 || v.UnknownCommitted != 1 || v.Failed != 1 || v.Unrecorded != 1 {
		t.Errorf("verdict %+v, want 20 acknowledged, 2 unknown (1 committed), 1 failed, 1 unrecorded", v)
	}
	// Through the Pool, the same.
	if _, err := ledger.Check(ctx, pool, `app.Orders`, "Key"); err != nil {
		t.Errorf("Check through the Pool: %v", err)
	}

	for _, tc := range []struct {
		name, sql string
		list      func(failovertest.Tally[int64]) []int64
		key       int64
		says      string
	}{
		{"an acknowledged row deleted", `DELETE FROM app."Orders" WHERE "Key" = 7`,
			func(v failovertest.Tally[int64]) []int64 { return v.Missing }, 7, "acknowledged but missing: 7"},
		{"an acknowledged row doubled", `INSERT INTO app."Orders" VALUES (9, 1)`,
			func(v failovertest.Tally[int64]) []int64 { return v.Duplicated }, 9, "applied more than once: 9"},
		{"a failed write present", `INSERT INTO app."Orders" VALUES (23, 1)`,
			func(v failovertest.Tally[int64]) []int64 { return v.FailedPresent }, 23, "reported failed but present: 23"},
	} {
		if _, err := pool.Exec(ctx, tc.sql); err != nil {
			t.Fatal(err)
		}
		v, err := check()
		if !errors.Is(err, failovertest.ErrMismatch) {
			t.Fatalf("%s: Check returned %v, want ErrMismatch", tc.name, err)
		}
		if !slices.Contains(tc.list(v), tc.key) || v.OK() {
			t.Errorf("%s: verdict %+v does not list key %d", tc.name, v, tc.key)
		}
		if !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "app.Orders.Key") {
			t.Errorf("%s: error does not say %q on app.Orders.Key: %v", tc.name, tc.says, err)
		}
	}

	// A table that does not exist is an error of its own.
	if _, err := ledger.Check(ctx, c.Primary(), "nosuch", "id"); err == nil || errors.Is(err, failovertest.ErrMismatch) {
		t.Errorf("Check of a missing table: %v", err)
	}
}

// TestLedgerUUIDKeys: keys of a uuid column scan into strings.
func TestLedgerUUIDKeys(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	p := c.Primary()
	const a, b = "6f1c3a52-7d1e-4a57-9c1e-1f0e1d2c3b4a", "0b8e2f1e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
	if err := p.Exec(ctx, `CREATE TABLE jobs (id uuid); INSERT INTO jobs VALUES ('`+a+`')`); err != nil {
		t.Fatal(err)
	}
	var ledger failovertest.Ledger[string]
	ledger.Record(a, nil)
	ledger.Record(b, nil)
	v, err := ledger.Check(ctx, p, "jobs", "id")
	if !errors.Is(err, failovertest.ErrMismatch) || !slices.Equal(v.Missing, []string{b}) {
		t.Fatalf("Check: %v, verdict %+v; want %s missing", err, v, b)
	}
}
