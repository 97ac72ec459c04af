package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestReader(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short; run: go test -race -run '^TestReader$' ./examples/reader/")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := failovertest.Start(t, failovertest.Replicas(2))
	var out strings.Builder
	if err := run(ctx, c.ConnString("max_lag=5s"), &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	t.Log("\n" + got)
	for _, want := range []string{
		": replica (port", // the first reads may come before the replicas' first samples
		"read right after a write sees 1 visit(s)",
		"a read with the token sees 2 visit(s)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
