package replica_test

import (
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/replica"
)

func fresh(ago time.Duration, now time.Time) time.Time { return now.Add(-ago) }

func TestRoute(t *testing.T) {
	now := at(100)
	ok := func(tier hosthealth.Tier, ago time.Duration, replayed replica.LSN) replica.Candidate {
		return replica.Candidate{Usable: true, Tier: tier, Fresh: fresh(ago, now), Replayed: replayed}
	}
	same, other := hosthealth.TierSame, hosthealth.TierOther
	unknown := replica.Candidate{Usable: true, Tier: same} // never probed
	down := replica.Candidate{Usable: false, Tier: same, Fresh: now, Replayed: 9999}
	gate := replica.Policy{MaxLag: 2 * time.Second, PinAfterWrite: time.Second}
	noGate := replica.Policy{PinAfterWrite: time.Second}

	for _, tc := range []struct {
		name   string
		policy replica.Policy
		read   replica.Read
		cands  []replica.Candidate
		want   []int // acceptable indexes (Primary for the primary)
		reason replica.Reason
	}{
		{"fresh replica", gate, replica.Read{Now: now}, []replica.Candidate{ok(same, time.Second, 10)}, []int{0}, replica.Eligible},
		{"pinned after a write", gate, replica.Read{Now: now, LastWrite: now.Add(-500 * time.Millisecond)}, []replica.Candidate{ok(same, 0, 10)}, []int{replica.Primary}, replica.Pinned},
		{"pin over", gate, replica.Read{Now: now, LastWrite: now.Add(-time.Second)}, []replica.Candidate{ok(same, 0, 10)}, []int{0}, replica.Eligible},
		{"pin off", replica.Policy{MaxLag: time.Second}, replica.Read{Now: now, LastWrite: now}, []replica.Candidate{ok(same, 0, 10)}, []int{0}, replica.Eligible},
		{"lagging", gate, replica.Read{Now: now}, []replica.Candidate{ok(same, 3*time.Second, 10)}, []int{replica.Primary}, replica.Lagging},
		{"bound exactly at the gate", gate, replica.Read{Now: now}, []replica.Candidate{ok(same, 2*time.Second, 10)}, []int{0}, replica.Eligible},
		{"unknown is not zero", gate, replica.Read{Now: now}, []replica.Candidate{unknown}, []int{replica.Primary}, replica.Lagging},
		{"no gate takes unknown", noGate, replica.Read{Now: now}, []replica.Candidate{unknown}, []int{0}, replica.Eligible},
		{"no gate takes any lag", noGate, replica.Read{Now: now}, []replica.Candidate{ok(other, time.Hour, 1)}, []int{0}, replica.Eligible},
		{"none usable", gate, replica.Read{Now: now}, []replica.Candidate{down}, []int{replica.Primary}, replica.Unavailable},
		{"no replicas", gate, replica.Read{Now: now}, nil, []int{replica.Primary}, replica.Unavailable},
		{"same zone first", gate, replica.Read{Now: now}, []replica.Candidate{ok(other, 0, 10), ok(same, time.Second, 10), ok(other, 0, 10)}, []int{1}, replica.Eligible},
		{"other zone when same lags", gate, replica.Read{Now: now}, []replica.Candidate{ok(same, 5*time.Second, 10), ok(other, 0, 10)}, []int{1}, replica.Eligible},
		{"skips a down replica", gate, replica.Read{Now: now}, []replica.Candidate{down, ok(other, 0, 10)}, []int{1}, replica.Eligible},
		{"causal: replayed", gate, replica.Read{Now: now, After: 50, LastWrite: now}, []replica.Candidate{ok(same, 0, 40), ok(other, 0, 60)}, []int{1}, replica.Eligible},
		{"causal: check the best", gate, replica.Read{Now: now, After: 50, LastWrite: now}, []replica.Candidate{ok(other, 0, 40), ok(same, 0, 45)}, []int{1}, replica.Verify},
		{"causal: gate still holds", gate, replica.Read{Now: now, After: 50}, []replica.Candidate{ok(same, 5*time.Second, 60)}, []int{replica.Primary}, replica.Lagging},
		{"causal: unknown position", gate, replica.Read{Now: now, After: 50}, []replica.Candidate{unknown}, []int{replica.Primary}, replica.Lagging},
		{"causal without gate", noGate, replica.Read{Now: now, After: 50}, []replica.Candidate{unknown}, []int{0}, replica.Verify},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := replica.Router{Policy: tc.policy}
			for range 4 {
				i, reason := rt.Route(tc.read, tc.cands)
				if reason != tc.reason || !contains(tc.want, i) {
					t.Fatalf("Route = %d, %v; want one of %v, %v", i, reason, tc.want, tc.reason)
				}
			}
		})
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestRouteTakesTurns: reads go round-robin over the eligible replicas of
// the best tier, and only those.
func TestRouteTakesTurns(t *testing.T) {
	now := at(10)
	c := func(tier hosthealth.Tier, usable bool) replica.Candidate {
		return replica.Candidate{Usable: usable, Tier: tier, Fresh: now, Replayed: 10}
	}
	cands := []replica.Candidate{
		c(hosthealth.TierSame, true),
		c(hosthealth.TierOther, true),
		c(hosthealth.TierSame, false),
		c(hosthealth.TierSame, true),
		c(hosthealth.TierSame, true),
	}
	rt := replica.Router{Policy: replica.Policy{MaxLag: time.Second}}
	counts := map[int]int{}
	for range 300 {
		i, reason := rt.Route(replica.Read{Now: now}, cands)
		if reason != replica.Eligible {
			t.Fatalf("reason %v", reason)
		}
		counts[i]++
	}
	if counts[0] != 100 || counts[3] != 100 || counts[4] != 100 || len(counts) != 3 {
		t.Fatalf("reads per replica: %v, want 100 each on 0, 3 and 4", counts)
	}
}

func TestReasonString(t *testing.T) {
	for r, want := range map[replica.Reason]string{
		replica.Eligible: "eligible", replica.Pinned: "pinned", replica.Lagging: "lagging",
		replica.Unavailable: "unavailable", replica.Verify: "verify", replica.Reason(99): "Reason(99)",
		replica.CaughtUp: "caught_up", replica.Waited: "waited",
		replica.OutageSync: "outage_sync", replica.OutageAsync: "outage_async",
	} {
		if r.String() != want {
			t.Errorf("%d.String() = %q, want %q", r, r.String(), want)
		}
	}
	for r := range replica.Reason(replica.NumReasons) {
		if want := r == replica.OutageSync || r == replica.OutageAsync; r.InOutage() != want || want && !r.OnReplica() {
			t.Errorf("%v: InOutage %v, OnReplica %v", r, r.InOutage(), r.OnReplica())
		}
	}
}

// TestRouteLast: a replica that reads last takes reads only when no other
// replica is eligible, whatever its zone.
func TestRouteLast(t *testing.T) {
	var rt replica.Router
	now := time.Unix(1000, 0)
	cands := []replica.Candidate{
		{Usable: true, Tier: hosthealth.TierSame, Last: true},
		{Usable: true, Tier: hosthealth.TierOther},
	}
	for range 4 {
		if i, reason := rt.Route(replica.Read{Now: now}, cands); i != 1 || reason != replica.Eligible {
			t.Fatalf("Route = %d, %v; want the replica that does not read last", i, reason)
		}
	}
	cands[1].Usable = false
	if i, reason := rt.Route(replica.Read{Now: now}, cands); i != 0 || reason != replica.Eligible {
		t.Fatalf("Route = %d, %v; want the one that reads last, alone eligible", i, reason)
	}
}
