package failover

import (
	"testing"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// TestDecide is the retry decision as a table: what happens to a failed
// attempt for every kind of failure, statement and budget.
func TestDecide(t *testing.T) {
	const (
		none       = hosthealth.NotFailover
		terminal   = hosthealth.Terminal
		topology   = hosthealth.Topology
		transient  = hosthealth.Transient
		transport  = hosthealth.Transport
		ran, unrun = false, true
	)
	type row struct {
		name       string
		class      hosthealth.Class
		didNotRun  bool
		rule       policy
		callerDone bool
		failedOver bool
		attempts   int
		timeLeft   bool
		want       verdict
		counts     bool
	}
	rows := []row{
		// The caller's context ended: nothing is retried.
		{"caller gave up on a write in flight", transport, ran, write, true, false, 0, true, failUnknown, false},
		{"caller gave up on an unsent write", transport, unrun, write, true, false, 0, true, passThrough, false},
		{"caller gave up on a read", transport, ran, idempotent, true, false, 0, true, passThrough, false},
		{"caller gave up mid-failover", transport, ran, idempotent, true, true, 1, true, failBudget, false},
		{"caller gave up mid-failover on a delivered read", transport, ran, delivered, true, true, 1, true, passThrough, false},

		// Not about the host.
		{"ordinary SQL error", none, ran, write, false, false, 0, true, passThrough, false},
		{"bad password", terminal, unrun, idempotent, false, false, 0, true, failHost, false},
		{"bad password mid-failover", terminal, unrun, idempotent, false, true, 3, true, failHost, false},

		// Moving on.
		{"replay-safe read cut off", transport, ran, idempotent, false, false, 0, true, tryNext, true},
		{"unsent write", transport, unrun, write, false, false, 0, true, tryNext, true},
		{"write refused by a standby", topology, unrun, write, false, false, 0, true, tryNext, false},
		{"refusal is free at the last attempt", topology, unrun, write, false, true, 7, true, tryNext, false},
		{"refusal past the deadline", topology, unrun, idempotent, false, true, 2, false, failBudget, false},
		{"server starting up", transient, unrun, write, false, false, 0, true, tryNext, true},
		{"read refused by a starting server", transient, unrun, readOnce, false, false, 0, true, tryNext, true},

		// The budget.
		{"last attempt used", transport, ran, idempotent, false, true, 7, true, failBudget, true},
		{"one attempt left", transport, ran, idempotent, false, true, 6, true, tryNext, true},
		{"deadline passed", transport, unrun, write, false, true, 1, false, failBudget, true},

		// Cannot move.
		{"write cut off in flight", transport, ran, write, false, false, 0, true, failUnknown, false},
		{"non-replayable read cut off", transport, ran, readOnce, false, false, 0, true, failHost, false},
		{"delivered rows then a cut", transport, ran, delivered, false, false, 0, true, failHost, false},
		{"delivered rows of a write then a cut", transport, ran, delivered | writes, false, false, 0, true, failUnknown, false},
		{"COPY that consumed rows, unsent", transport, unrun, writes, false, false, 0, true, failHost, false},
		{"write refused after rows were read", topology, unrun, writes, false, false, 0, true, failHost, false},
		{"write killed by admin after sending", transient, ran, write, false, false, 0, true, failHost, false},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			got, counts := decide(failure{
				class: r.class, didNotRun: r.didNotRun, rule: r.rule, callerDone: r.callerDone,
				failedOver: r.failedOver, attempts: r.attempts, maxAttempts: 8, timeLeft: r.timeLeft,
			})
			if got != r.want || counts != r.counts {
				t.Errorf("decide = %v (counts %v), want %v (counts %v)", got, counts, r.want, r.counts)
			}
		})
	}
}

// TestDecideAnswered: once the server has answered a statement with an
// error, its outcome is known (it did not commit), even when the caller's
// deadline ends at the same moment.
func TestDecideAnswered(t *testing.T) {
	f := failure{class: hosthealth.NotFailover, rule: write, callerDone: true, maxAttempts: 8, timeLeft: true}
	if v, _ := decide(f); v != failUnknown {
		t.Fatalf("a write cut off as its caller gave up: %v, want %v", v, failUnknown)
	}
	f.answered = true
	if v, _ := decide(f); v != passThrough {
		t.Fatalf("a write the server refused as its caller gave up: %v, want %v", v, passThrough)
	}
}
