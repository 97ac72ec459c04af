package replica_test

import (
	"fmt"
	"time"

	"github.com/pgfailover/pgfailover/replica"
)

// A replica's staleness bound comes from the primary's samples: the newest
// sample its replay position has reached says which writes it holds.
func Example() {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := replica.NewHistory(64)
	// The primary, probed once a second, wrote a little between probes.
	for s, lsn := range []string{"0/3000000", "0/3000100", "0/3000200", "0/3000300"} {
		pos, _ := replica.ParseLSN(lsn)
		h.Add(replica.Sample{LSN: pos, At: start.Add(time.Duration(s) * time.Second)})
	}
	// The replica has replayed up to 0/3000180: it holds every write the
	// primary acknowledged before the sample at 12:00:01.
	replayed, _ := replica.ParseLSN("0/3000180")
	fresh, _ := h.Reached(replayed)
	c := replica.Candidate{Usable: true, Fresh: fresh, Replayed: replayed}

	rt := replica.Router{Policy: replica.Policy{MaxLag: 2 * time.Second}}
	for _, s := range []int{3, 4} {
		now := start.Add(time.Duration(s) * time.Second)
		bound, _ := c.Staleness(now)
		i, reason := rt.Route(replica.Read{Now: now}, []replica.Candidate{c})
		fmt.Printf("at +%ds: bound %v, route %d (%v)\n", s, bound, i, reason)
	}
	// Output:
	// at +3s: bound 2s, route 0 (eligible)
	// at +4s: bound 3s, route -1 (lagging)
}
