package failover_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// TestReaderBehindASpreadingEndpoint: the Pool names the primary and a
// reader endpoint that spreads new connections over two replicas; the
// one its probe did not reach has stopped replaying. Right after each
// write, one read through the Reader (pinned by the write), then several
// at once, so that the Reader holds connections to both replicas behind
// the one name. Each read judges the server its connection reached, not the
// name: none misses the write it follows.
func TestReaderBehindASpreadingEndpoint(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	primary, reps := c.Primary(), c.Replicas()
	ep, err := c.Endpoint(reps...)
	if err != nil {
		t.Fatal(err)
	}
	dsn := strings.Replace(c.ConnStringFor([]*failovertest.Node{primary, reps[0]}, "pool_max_conns=4"), reps[0].Addr(), ep.Addr(), 1)
	pool := newPool(t, ctx, dsn)
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id bigint)"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	// The replica the host's probe did not reach stops replaying: what
	// the Pool knows of the host's freshness is the other one's.
	var paused *failovertest.Node
	waitUntil(t, 10*time.Second, "the endpoint's host to name its server", func() bool {
		server := hostStat(t, pool, ep.Addr()).Server
		for i, r := range reps {
			if r.Addr() == server {
				paused = reps[1-i]
			}
		}
		return paused != nil
	})
	if err := paused.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = paused.ResumeReplay(ctx) })

	const writes, readers = 50, 4
	var mu sync.Mutex
	misses, reads := 0, 0
	for i := range writes {
		if _, err := pool.Exec(ctx, "INSERT INTO orders VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
		// One read first, which checks the position on its connection;
		// then several at once, on every connection the Reader holds.
		var wg sync.WaitGroup
		for k := range readers + 1 {
			if k == 1 {
				wg.Wait()
			}
			wg.Go(func() {
				var seen bool
				err := pool.Reader().QueryRow(ctx, "SELECT EXISTS (SELECT FROM orders WHERE id = $1)", i).Scan(&seen)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("read after write %d: %v", i, err)
					return
				}
				reads++
				if !seen {
					misses++
				}
			})
		}
		wg.Wait()
	}
	st := hostStat(t, pool, ep.Addr())
	t.Logf("%d reads, %d missed the write before them; the endpoint's host: server %s, %d Reader connections", reads, misses, st.Server, st.Reads.TotalConns())
	if misses > 0 {
		t.Errorf("%d of %d reads missed the write before them", misses, reads)
	}
}
