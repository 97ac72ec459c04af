package failovertest_test

import (
	"context"
	"testing"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// BenchmarkStart times a primary with one streaming replica, ready for a
// test, after the process's first cluster (which runs initdb).
func BenchmarkStart(b *testing.B) {
	ctx := context.Background()
	warm, err := failovertest.New(ctx, failovertest.Replicas(0))
	if err != nil {
		b.Fatal(err)
	}
	if err := warm.Close(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		c, err := failovertest.New(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
