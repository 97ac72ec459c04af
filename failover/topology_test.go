package failover_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/topology"
)

// fakeSource is a topology source the test drives by hand.
type fakeSource struct{ updates chan topology.Topology }

func (f *fakeSource) Watch(ctx context.Context, update func(topology.Topology)) error {
	for {
		select {
		case t := <-f.updates:
			update(t)
		case <-ctx.Done():
			return nil
		}
	}
}

// members lists nodes as topology members claiming role.
func members(role hosthealth.Role, nodes ...*failovertest.Node) topology.Topology {
	var t topology.Topology
	for _, n := range nodes {
		host, port, _ := net.SplitHostPort(n.Addr()) // where clients reach it
		p, _ := strconv.Atoi(port)
		t.Members = append(t.Members, topology.Member{Host: host, Port: uint16(p), Role: role})
	}
	return t
}

// portReader reads the serving server's port through the pool until
// stopped, and counts reads per port and failures.
type portReader struct {
	*loop

	mu     sync.Mutex // guards the fields below
	byPort map[int]int
	errs   []error
}

func startPortReaders(t *testing.T, ctx context.Context, pool *failover.Pool, n int) *portReader {
	r := &portReader{byPort: map[int]int{}}
	r.loop = startLoop(t, n, func() {
		var port int
		// The sleep keeps calls in flight while hosts come and go.
		err := pool.QueryRow(ctx, "SELECT current_setting('port')::int FROM pg_sleep(0.005)").Scan(&port)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err == nil {
			r.byPort[port]++
		} else {
			r.errs = append(r.errs, err)
		}
	})
	return r
}

func (r *portReader) reads(port int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byPort[port]
}

func hostAddrs(pool *failover.Pool) []string {
	var addrs []string
	for _, h := range pool.Stat().Hosts() {
		addrs = append(addrs, h.Addr)
	}
	return addrs
}

// TestTopologyChangesUnderLoad adds, removes and swaps hosts through a
// topology source while reads run on them. The connection string names
// only the primary, which cannot serve the read-only target, so every read
// depends on the hosts the source reports. No read fails because of a
// change; a removed host gets no new reads once its removal is seen; and
// goleak, in TestMain, checks that the drained hosts leave no goroutine.
func TestTopologyChangesUnderLoad(t *testing.T) {
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(2))
	r1, r2 := c.Replicas()[0], c.Replicas()[1]
	src := &fakeSource{updates: make(chan topology.Topology)}
	cfg, err := failover.ParseConfig(c.Primary().ConnString("target=read-only&pool_max_conns=4"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Topology = src

	// New waits for the source's first report, so it finds a replica.
	created := make(chan *failover.Pool, 1)
	go func() {
		pool, err := failover.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Error(err)
		}
		created <- pool
	}()
	src.updates <- members(hosthealth.RoleReplica, r1)
	pool := <-created
	if pool == nil {
		t.FailNow()
	}
	defer pool.Close()
	if got, want := fmt.Sprint(hostAddrs(pool)), fmt.Sprint([]string{c.Primary().Addr(), r1.Addr()}); got != want {
		t.Fatalf("hosts %s, want %s", got, want)
	}

	reads := startPortReaders(t, ctx, pool, 6)
	waitUntil(t, 30*time.Second, "reads on the first replica", func() bool { return reads.reads(r1.Port()) >= 50 })

	// Add a host.
	src.updates <- members(hosthealth.RoleReplica, r1, r2)
	waitUntil(t, 30*time.Second, "the added host in the table", func() bool { return len(hostAddrs(pool)) == 3 })

	// Remove the host every read goes to, while reads are in flight on it.
	src.updates <- members(hosthealth.RoleReplica, r2)
	waitUntil(t, 30*time.Second, "reads on the remaining replica", func() bool { return reads.reads(r2.Port()) >= 50 })
	if got := len(hostAddrs(pool)); got != 2 {
		t.Fatalf("%d hosts after the removal, want 2", got)
	}
	onRemoved := reads.reads(r1.Port())

	// Swap the whole set.
	src.updates <- members(hosthealth.RoleReplica, r1)
	before := reads.reads(r1.Port())
	waitUntil(t, 30*time.Second, "reads on the swapped-in replica", func() bool { return reads.reads(r1.Port()) >= before+50 })
	if got, want := fmt.Sprint(hostAddrs(pool)), fmt.Sprint([]string{c.Primary().Addr(), r1.Addr()}); got != want {
		t.Fatalf("hosts %s after the swap, want %s", got, want)
	}
	reads.stop()

	reads.mu.Lock()
	defer reads.mu.Unlock()
	for _, err := range reads.errs {
		t.Errorf("a read failed while the topology changed: %v", err)
	}
	if before < onRemoved {
		t.Errorf("reads on the removed host went from %d to %d after its removal was seen", onRemoved, before)
	}
	t.Logf("reads per port: %v", reads.byPort)
}
