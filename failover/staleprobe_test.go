package failover_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
)

// TestProbeAnswerOlderThanAFailureIsDropped: a probe that was in flight
// when its host failed answers afterwards; the answer predates the failure
// and must not mark the host healthy. The probe's server process is
// stopped (SIGSTOP) with the probe's question sent, a call fails on the
// host meanwhile, and the process is let go. The host stays failed until
// a probe that began after the failure answers. Without the rule, the
// late answer marks it healthy at once, before the next probe begins.
func TestProbeAnswerOlderThanAFailureIsDropped(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	const interval = 3 * time.Second
	pool := newPool(t, ctx, c.ConnString("health_probe_interval=3s&health_probe_timeout=60s"))
	host := func() failover.HostStat { return pool.Stat().Hosts()[0] }

	admin, err := c.Primary().Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	// The probe's own backend: its session runs the probe's question.
	var pid int
	waitUntil(t, 30*time.Second, "the probe's session", func() bool {
		err := admin.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE query LIKE '%pg_is_in_recovery()%' AND pid <> pg_backend_pid() AND backend_type = 'client backend'").Scan(&pid)
		return err == nil && pid > 0
	})
	probes := host().Probes
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	// The next probe's question is in flight once its count is taken.
	waitUntil(t, 3*interval, "the next probe to be sent", func() bool { return host().Probes > probes })
	held := host().Probes

	// A call fails on the host: its session ends under it (57P01).
	if _, err := pool.Exec(failover.NoRetry(ctx), "SELECT pg_terminate_backend(pg_backend_pid())"); err == nil {
		t.Fatal("a session that terminated itself reported success")
	}
	if st := host().State; st != hosthealth.TransportError {
		t.Fatalf("after the failed call the host is %v, want %v", st, hosthealth.TransportError)
	}

	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	// Until a later probe is sent, the held probe's answer is all the
	// host says: the host must stay failed.
	deadline := time.Now().Add(6 * interval)
	for {
		h := host()
		if h.Probes > held {
			break
		}
		if h.State != hosthealth.TransportError {
			t.Fatalf("the answer of a probe sent before the failure made the host %v", h.State)
		}
		if time.Now().After(deadline) {
			t.Fatal("no probe after the held one")
		}
		time.Sleep(2 * time.Millisecond)
	}
	waitUntil(t, 6*interval, "a later probe to find the host healthy", func() bool { return host().State == hosthealth.Healthy })
}
