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

func TestBasic(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short; run: go test -race -run '^TestBasic$' ./examples/basic/")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := failovertest.Start(t)
	var out strings.Builder
	if err := run(ctx, c.ConnString(""), &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "standby: false") {
		t.Errorf("basic did not reach the primary:\n%s", got)
	}
	for _, n := range c.Nodes() {
		if !strings.Contains(got, n.Addr()) {
			t.Errorf("basic does not list host %s:\n%s", n.Addr(), got)
		}
	}
}
