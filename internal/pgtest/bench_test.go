package pgtest

import (
	"context"
	"testing"
	"time"
)

// warmTemplate runs initdb before the timed loop.
func warmTemplate(b *testing.B) {
	b.Helper()
	bins, err := cachedBinaries(context.Background(), "")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := templateFor(context.Background(), bins); err != nil {
		b.Fatal(err)
	}
}

// nextReplica returns the first running node after the primary in node order.
func nextReplica(c *Cluster) *Node {
	nodes := c.Nodes()
	p := c.Primary()
	for i, n := range nodes {
		if n == p {
			for j := 1; j < len(nodes); j++ {
				if r := nodes[(i+j)%len(nodes)]; r.Running() {
					return r
				}
			}
		}
	}
	return nil
}

func BenchmarkNew(b *testing.B) {
	warmTemplate(b)
	ctx := context.Background()
	for _, replicas := range []int{0, 2} {
		b.Run(map[int]string{0: "primary", 2: "primary+2replicas"}[replicas], func(b *testing.B) {
			for b.Loop() {
				c, err := New(ctx, Options{Replicas: replicas})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

func BenchmarkSwitchover(b *testing.B) {
	ctx := context.Background()
	c := Start(b, Options{Replicas: 2})
	for b.Loop() {
		if err := c.Switchover(ctx, nextReplica(c)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFailoverRejoin times Failover and reports the Rejoin of the old
// primary that follows as a separate metric.
func BenchmarkFailoverRejoin(b *testing.B) {
	ctx := context.Background()
	c := Start(b, Options{Replicas: 2})
	var rejoin time.Duration
	for b.Loop() {
		old, to := c.Primary(), nextReplica(c)
		if err := c.Failover(ctx, to); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		start := time.Now()
		if err := c.Rejoin(ctx, old, to); err != nil {
			b.Fatal(err)
		}
		rejoin += time.Since(start)
		b.StartTimer()
	}
	b.ReportMetric(float64(rejoin.Milliseconds())/float64(b.N), "rejoin-ms/op")
}
