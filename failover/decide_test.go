package failover

import (
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

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
		{"caller gave up on a write in flight", transport, ran, writeOnce, true, false, 0, true, failUnknown, false},
		{"caller gave up on an unsent write", transport, unrun, writeOnce, true, false, 0, true, passThrough, false},
		{"caller gave up on a read", transport, ran, idempotent, true, false, 0, true, passThrough, false},
		{"caller gave up mid-failover", transport, ran, idempotent, true, true, 1, true, failBudget, false},
		{"caller gave up mid-failover on a delivered read", transport, ran, rowsDelivered, true, true, 1, true, passThrough, false},

		// Not about the host.
		{"ordinary SQL error", none, ran, writeOnce, false, false, 0, true, passThrough, false},
		{"bad password", terminal, unrun, idempotent, false, false, 0, true, failHost, false},
		{"bad password mid-failover", terminal, unrun, idempotent, false, true, 3, true, failHost, false},

		// Moving on.
		{"replay-safe read cut off", transport, ran, idempotent, false, false, 0, true, tryNext, true},
		{"unsent write", transport, unrun, writeOnce, false, false, 0, true, tryNext, true},
		{"write refused by a standby", topology, unrun, writeOnce, false, false, 0, true, tryNext, false},
		{"refusal is free at the last attempt", topology, unrun, writeOnce, false, true, 7, true, tryNext, false},
		{"refusal past the deadline", topology, unrun, idempotent, false, true, 2, false, failBudget, false},
		{"server starting up", transient, unrun, writeOnce, false, false, 0, true, tryNext, true},
		{"read refused by a starting server", transient, unrun, readOnce, false, false, 0, true, tryNext, true},

		// The budget.
		{"last attempt used", transport, ran, idempotent, false, true, 7, true, failBudget, true},
		{"one attempt left", transport, ran, idempotent, false, true, 6, true, tryNext, true},
		{"deadline passed", transport, unrun, writeOnce, false, true, 1, false, failBudget, true},

		// Cannot move.
		{"write cut off in flight", transport, ran, writeOnce, false, false, 0, true, failUnknown, false},
		{"non-replayable read cut off", transport, ran, readOnce, false, false, 0, true, failHost, false},
		{"delivered rows then a cut", transport, ran, rowsDelivered, false, false, 0, true, failHost, false},
		{"delivered rows of a write then a cut", transport, ran, rowsDelivered | mayWrite, false, false, 0, true, failUnknown, false},
		{"COPY that consumed rows, unsent", transport, unrun, mayWrite, false, false, 0, true, failHost, false},
		{"write refused after rows were read", topology, unrun, mayWrite, false, false, 0, true, failHost, false},
		{"write killed by admin after sending", transient, ran, writeOnce, false, false, 0, true, failHost, false},
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
	f := failure{class: hosthealth.NotFailover, rule: writeOnce, callerDone: true, maxAttempts: 8, timeLeft: true}
	if v, _ := decide(f); v != failUnknown {
		t.Fatalf("a write cut off as its caller gave up: %v, want %v", v, failUnknown)
	}
	f.answered = true
	if v, _ := decide(f); v != passThrough {
		t.Fatalf("a write the server refused as its caller gave up: %v, want %v", v, passThrough)
	}
}

// TestDecideMeaning is the call's own reading of an error, before the
// retry decision: what the failure means, whether the host is marked and
// the event recorded, and the verdict that follows.
func TestDecideMeaning(t *testing.T) {
	const (
		none      = hosthealth.NotFailover
		terminal  = hosthealth.Terminal
		topology  = hosthealth.Topology
		transient = hosthealth.Transient
		transport = hosthealth.Transport
	)
	rows := []struct {
		name         string
		f            failure
		meaning      hosthealth.Class
		mark, record bool
		verdict      verdict
		counts       bool
	}{
		{"a standby refused a write",
			failure{class: topology, didNotRun: true, answered: true, rule: writeOnce},
			topology, true, true, tryNext, false},
		{"a read-only setting the application chose",
			failure{class: topology, byChoice: true, didNotRun: true, answered: true, rule: writeOnce},
			none, false, false, passThrough, false},
		{"a write refused under a target that takes standbys",
			failure{class: topology, takesReads: true, didNotRun: true, answered: true, rule: writeOnce},
			none, false, false, passThrough, false},
		{"a connection refused for its role under a target that takes standbys",
			failure{class: topology, takesReads: true, roleRefused: true, didNotRun: true, rule: idempotent},
			topology, true, true, tryNext, false},
		{"a bad password is recorded, not marked",
			failure{class: terminal, didNotRun: true, answered: true, rule: idempotent},
			terminal, false, true, failHost, false},
		{"a server starting up",
			failure{class: transient, didNotRun: true, answered: true, rule: writeOnce},
			transient, true, true, tryNext, true},
		{"a cut connection",
			failure{class: transport, rule: idempotent},
			transport, true, true, tryNext, true},
		{"an ordinary error",
			failure{class: none, answered: true, rule: writeOnce},
			none, false, false, passThrough, false},
		{"the caller gave up: nothing marked",
			failure{class: transport, rule: idempotent, callerDone: true},
			transport, false, false, passThrough, false},
		{"the caller gave up on a write the server refused by choice",
			failure{class: topology, byChoice: true, answered: true, didNotRun: true, rule: writeOnce, callerDone: true},
			none, false, false, passThrough, false},
		{"the caller gave up on a write refused under a target that takes standbys, answered",
			failure{class: topology, takesReads: true, answered: true, rule: mayWrite, callerDone: true},
			none, false, false, passThrough, false},
		{"the caller gave up on a write a standby refused: its answer is not an outcome",
			failure{class: topology, answered: true, rule: mayWrite, callerDone: true},
			topology, false, false, failUnknown, false},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			r.f.maxAttempts, r.f.timeLeft = 8, true
			if got := r.f.meaning(); got != r.meaning {
				t.Errorf("meaning = %v, want %v", got, r.meaning)
			}
			if mark, record := r.f.marks(); mark != r.mark || record != r.record {
				t.Errorf("marks = %v, %v, want %v, %v", mark, record, r.mark, r.record)
			}
			if v, counts := decide(r.f); v != r.verdict || counts != r.counts {
				t.Errorf("decide = %v (counts %v), want %v (counts %v)", v, counts, r.verdict, r.counts)
			}
		})
	}
}

// TestClassify is what classify reads from an error, for each error a
// call meets.
func TestClassify(t *testing.T) {
	standby := &pgconn.PgError{Code: "25006"}
	roleErr := &hosthealth.RoleError{Addr: "db:5432", Role: hosthealth.RoleReplica, Target: hosthealth.TargetPrimary}
	rows := []struct {
		name   string
		err    error
		target hosthealth.Target
		want   failure
		report error
	}{
		{"a standby refused a write", standby, hosthealth.TargetPrimary,
			failure{class: hosthealth.Topology, didNotRun: true, answered: true, rule: writeOnce}, standby},
		{"by the application's choice", &readOnlyByChoice{standby}, hosthealth.TargetPrimary,
			failure{class: hosthealth.Topology, byChoice: true, didNotRun: true, answered: true, rule: writeOnce}, standby},
		{"under a target that takes standbys", standby, hosthealth.TargetAny,
			failure{class: hosthealth.Topology, takesReads: true, didNotRun: true, answered: true, rule: writeOnce}, standby},
		{"refused for its role", roleErr, hosthealth.TargetPrimary,
			failure{class: hosthealth.Topology, roleRefused: true, rule: writeOnce}, roleErr},
		{"end of file", io.EOF, hosthealth.TargetPrimary,
			failure{class: hosthealth.Transport, rule: writeOnce}, io.EOF},
		{"starting up", &pgconn.PgError{Code: "57P03"}, hosthealth.TargetPrimary,
			failure{class: hosthealth.Transient, didNotRun: true, answered: true, rule: writeOnce}, nil},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			got, report := classify(r.err, writeOnce, r.target)
			if got != r.want {
				t.Errorf("classify = %+v, want %+v", got, r.want)
			}
			if r.report != nil && report != r.report {
				t.Errorf("reports %v, want %v", report, r.report)
			}
		})
	}
}
