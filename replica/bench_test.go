package replica_test

import (
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/replica"
)

// benchRoute returns a router with a gate set, three replicas in two
// zones and a read for them.
func benchRoute() (*replica.Router, []replica.Candidate, replica.Read) {
	now := at(100)
	cands := []replica.Candidate{
		{Usable: true, Tier: hosthealth.TierOther, Fresh: now, Replayed: 10},
		{Usable: true, Tier: hosthealth.TierSame, Fresh: now, Replayed: 10},
		{Usable: true, Tier: hosthealth.TierSame, Fresh: now.Add(-time.Second), Replayed: 9},
	}
	rt := &replica.Router{Policy: replica.Policy{MaxLag: 2 * time.Second, PinAfterWrite: time.Second}}
	return rt, cands, replica.Read{Now: now, LastWrite: now.Add(-time.Minute)}
}

// BenchmarkRoute is the routing decision of one read over three replicas
// in two zones, with a gate set, from every CPU at once.
func BenchmarkRoute(b *testing.B) {
	rt, cands, r := benchRoute()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if i, _ := rt.Route(r, cands); i == replica.Primary {
				b.Fatal("routed to the primary")
			}
		}
	})
}

// BenchmarkRouteSerial is BenchmarkRoute from one goroutine.
func BenchmarkRouteSerial(b *testing.B) {
	rt, cands, r := benchRoute()
	b.ReportAllocs()
	for b.Loop() {
		if i, _ := rt.Route(r, cands); i == replica.Primary {
			b.Fatal("routed to the primary")
		}
	}
}
