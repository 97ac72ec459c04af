package probe

import (
	"sync"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
)

// FirstLead is how long First waits for the server of a host whose probe
// has not ended to send something before it hands the turn to the next
// host.
const FirstLead = 500 * time.Millisecond

// First runs the first probe of n hosts, as a Pool does when it starts.
// run(i) probes host i and returns its error (nil when the server
// answered); spoke(i) reports whether host i's server has sent anything
// yet.
//
// Credentials hold cluster-wide, as pgx assumes when it stops at the first
// 28P01, so they are tried on one host at a time until a server has
// settled them: the hosts are probed in order, each alone, until one logs
// in (then the rest are probed in parallel) or refuses the credentials (a
// Terminal error: First then waits for the probes under way and stops, so
// that no other host sees the password). A host that cannot be reached
// settles nothing and passes the turn at once; one whose server has sent
// nothing after FirstLead passes it, and is still waited for. One whose
// server has spoken keeps the turn until its probe ends, however loaded
// the server or the client: a slow login is not a host that is gone.
//
// First returns how many hosts were probed (the first ran of them), and
// the host whose server refused the credentials, or -1.
func First(clk clock.Clock, n int, run func(i int) error, spoke func(i int) bool) (ran, refused int) {
	errs := make([]error, n)
	done := make(chan int, n)
	var wg sync.WaitGroup
	start := func(i int) {
		wg.Go(func() {
			errs[i] = run(i)
			done <- i
		})
	}
	next := 0
	for settled := false; !settled && next < n; {
		start(next)
		next++
		t := clk.NewTimer(FirstLead)
	turn:
		for {
			select {
			case i := <-done:
				switch {
				case errs[i] == nil:
					settled = true
				case hosthealth.Classify(errs[i]) == hosthealth.Terminal:
					t.Stop()
					wg.Wait()
					return next, i
				case i != next-1:
					// An earlier host, whose turn had passed, settled
					// nothing: the current one keeps its turn.
					continue
				}
				// Settled, or the current host settled nothing (it could
				// not be reached): the turn ends.
				break turn
			case <-t.C():
				if !spoke(next - 1) {
					break turn
				}
				// The server speaks: it is slow, not gone, and will
				// settle the credentials within the probe's timeout.
				t = clk.NewTimer(FirstLead)
			}
		}
		t.Stop()
	}
	for ; next < n; next++ {
		start(next)
	}
	wg.Wait()
	return n, -1
}
