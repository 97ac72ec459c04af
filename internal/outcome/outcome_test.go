package outcome

import (
	"context"
	"fmt"
	"io"
	"syscall"
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
		rule       Rule
		callerDone bool
		failedOver bool
		attempts   int
		timeLeft   bool
		want       Verdict
		counts     bool
	}
	rows := []row{
		// The caller's context ended: nothing is retried.
		{"caller gave up on a write in flight", transport, ran, WriteOnce, true, false, 0, true, FailUnknown, false},
		{"caller gave up on an unsent write", transport, unrun, WriteOnce, true, false, 0, true, PassThrough, false},
		{"caller gave up on a read", transport, ran, Idempotent, true, false, 0, true, PassThrough, false},
		{"caller gave up mid-failover", transport, ran, Idempotent, true, true, 1, true, FailBudget, false},
		{"caller gave up mid-failover on a delivered read", transport, ran, RowsDelivered, true, true, 1, true, PassThrough, false},

		// Not about the host.
		{"ordinary SQL error", none, ran, WriteOnce, false, false, 0, true, PassThrough, false},
		{"bad password", terminal, unrun, Idempotent, false, false, 0, true, FailHost, false},
		{"bad password mid-failover", terminal, unrun, Idempotent, false, true, 3, true, FailHost, false},

		// Moving on.
		{"replay-safe read cut off", transport, ran, Idempotent, false, false, 0, true, TryNext, true},
		{"unsent write", transport, unrun, WriteOnce, false, false, 0, true, TryNext, true},
		{"write refused by a standby", topology, unrun, WriteOnce, false, false, 0, true, TryNext, false},
		{"refusal is free at the last attempt", topology, unrun, WriteOnce, false, true, 7, true, TryNext, false},
		{"refusal past the deadline", topology, unrun, Idempotent, false, true, 2, false, FailBudget, false},
		{"server starting up", transient, unrun, WriteOnce, false, false, 0, true, TryNext, true},
		{"read refused by a starting server", transient, unrun, ReadOnce, false, false, 0, true, TryNext, true},

		// The budget.
		{"last attempt used", transport, ran, Idempotent, false, true, 7, true, FailBudget, true},
		{"one attempt left", transport, ran, Idempotent, false, true, 6, true, TryNext, true},
		{"deadline passed", transport, unrun, WriteOnce, false, true, 1, false, FailBudget, true},

		// Cannot move.
		{"write cut off in flight", transport, ran, WriteOnce, false, false, 0, true, FailUnknown, false},
		{"non-replayable read cut off", transport, ran, ReadOnce, false, false, 0, true, FailHost, false},
		{"delivered rows then a cut", transport, ran, RowsDelivered, false, false, 0, true, FailHost, false},
		{"delivered rows of a write then a cut", transport, ran, RowsDelivered | MayWrite, false, false, 0, true, FailUnknown, false},
		{"COPY that consumed rows, unsent", transport, unrun, MayWrite, false, false, 0, true, FailHost, false},
		{"write refused after rows were read", topology, unrun, MayWrite, false, false, 0, true, FailHost, false},
		{"write killed by admin after sending", transient, ran, WriteOnce, false, false, 0, true, FailHost, false},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			got, counts := decideCallFor(Failure{
				Class: r.class, DidNotRun: r.didNotRun, Rule: r.rule, CallerDone: r.callerDone,
				FailedOver: r.failedOver, Attempts: r.attempts, MaxAttempts: 8, TimeLeft: r.timeLeft,
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
	f := Failure{Class: hosthealth.NotFailover, Rule: WriteOnce, CallerDone: true, MaxAttempts: 8, TimeLeft: true}
	if v, _ := decideCallFor(f); v != FailUnknown {
		t.Fatalf("a write cut off as its caller gave up: %v, want %v", v, FailUnknown)
	}
	f.Answered = true
	if v, _ := decideCallFor(f); v != PassThrough {
		t.Fatalf("a write the server refused as its caller gave up: %v, want %v", v, PassThrough)
	}
}

// TestDecideMeaning is the call's own reading of an error, before the
// retry decision: what the failure means, whether the host is marked and
// the event recorded, and the Verdict that follows.
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
		f            Failure
		meaning      hosthealth.Class
		mark, record bool
		verdict      Verdict
		counts       bool
	}{
		{"a standby refused a write",
			Failure{Class: topology, DidNotRun: true, Answered: true, Rule: WriteOnce},
			topology, true, true, TryNext, false},
		{"a read-only setting the application chose",
			Failure{Class: topology, ByChoice: true, DidNotRun: true, Answered: true, Rule: WriteOnce},
			none, false, false, PassThrough, false},
		{"a write refused under a target that takes standbys",
			Failure{Class: topology, TakesReads: true, DidNotRun: true, Answered: true, Rule: WriteOnce},
			none, false, false, PassThrough, false},
		{"a connection refused for its role under a target that takes standbys",
			Failure{Class: topology, TakesReads: true, RoleRefused: true, DidNotRun: true, Rule: Idempotent},
			topology, true, true, TryNext, false},
		{"a bad password is recorded, not marked",
			Failure{Class: terminal, DidNotRun: true, Answered: true, Rule: Idempotent},
			terminal, false, true, FailHost, false},
		{"a server starting up",
			Failure{Class: transient, DidNotRun: true, Answered: true, Rule: WriteOnce},
			transient, true, true, TryNext, true},
		{"a cut connection",
			Failure{Class: transport, Rule: Idempotent},
			transport, true, true, TryNext, true},
		{"an ordinary error",
			Failure{Class: none, Answered: true, Rule: WriteOnce},
			none, false, false, PassThrough, false},
		{"the caller gave up: nothing marked",
			Failure{Class: transport, Rule: Idempotent, CallerDone: true},
			transport, false, false, PassThrough, false},
		{"the caller gave up on a write the server refused by choice",
			Failure{Class: topology, ByChoice: true, Answered: true, DidNotRun: true, Rule: WriteOnce, CallerDone: true},
			none, false, false, PassThrough, false},
		{"the caller gave up on a write refused under a target that takes standbys, answered",
			Failure{Class: topology, TakesReads: true, Answered: true, Rule: MayWrite, CallerDone: true},
			none, false, false, PassThrough, false},
		{"the caller gave up on a write a standby refused: its answer is not an outcome",
			Failure{Class: topology, Answered: true, Rule: MayWrite, CallerDone: true},
			topology, false, false, FailUnknown, false},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			r.f.MaxAttempts, r.f.TimeLeft = 8, true
			if got := r.f.Meaning(); got != r.meaning {
				t.Errorf("meaning = %v, want %v", got, r.meaning)
			}
			if d := Decide(r.f); d.Mark != r.mark || d.Record != r.record {
				t.Errorf("marks = %v, %v, want %v, %v", d.Mark, d.Record, r.mark, r.record)
			}
			if v, counts := decideCallFor(r.f); v != r.verdict || counts != r.counts {
				t.Errorf("decide = %v (counts %v), want %v (counts %v)", v, counts, r.verdict, r.counts)
			}
		})
	}
}

// TestDecideConnect: a connection that could not be had is decided as a
// call's Idempotent attempt, but for what waiting for it meets: a host
// gone meanwhile, the budget's deadline cutting the dial, a caller that
// gave up before any failover event.
func TestDecideConnect(t *testing.T) {
	transport, terminal := hosthealth.Transport, hosthealth.Terminal
	rows := []struct {
		name                     string
		f                        Failure
		verdict                  Verdict
		mark, record, note, cnts bool
	}{
		{"a refused dial moves on, marked and counted",
			Failure{Class: transport, DidNotRun: true, TimeLeft: true},
			TryNext, true, true, false, true},
		{"a bad password ends the call",
			Failure{Class: terminal, DidNotRun: true, Answered: true, TimeLeft: true},
			FailHost, false, true, false, false},
		{"the host left while the call waited: passed over, no news",
			Failure{Class: transport, HostGone: true, TimeLeft: true},
			TryNext, false, false, false, false},
		{"the budget cut the dial: the budget ends the call, the host is not marked",
			Failure{Class: transport, FailedOver: true},
			FailBudget, false, false, true, false},
		{"the caller gave up before any event: its error, on the host",
			Failure{Class: transport, CallerDone: true, TimeLeft: true},
			FailHost, false, false, false, false},
		{"the caller gave up mid-failover: the budget's error",
			Failure{Class: transport, CallerDone: true, FailedOver: true, TimeLeft: true},
			FailBudget, false, false, false, false},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			r.f.Phase, r.f.Rule, r.f.MaxAttempts = Connect, RowsDelivered, 8 // Rule is Idempotent whatever the caller says
			d := Decide(r.f)
			if d.Verdict != r.verdict || d.Mark != r.mark || d.Record != r.record || d.Note != r.note || d.Counts != r.cnts {
				t.Errorf("Decide = %+v, want verdict %v, mark %v, record %v, note %v, counts %v", d, r.verdict, r.mark, r.record, r.note, r.cnts)
			}
		})
	}
}

// TestEndsConnect: only what no other host or later try would mend ends
// a connect: a refused password, an unknown database.
func TestEndsConnect(t *testing.T) {
	rows := []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Severity: "FATAL", Code: "28P01"}, true},
		{&pgconn.PgError{Severity: "FATAL", Code: "3D000"}, true},
		{&pgconn.PgError{Severity: "FATAL", Code: "57P03"}, false},
		{&pgconn.PgError{Severity: "FATAL", Code: "53300"}, false},
		{&pgconn.PgError{Severity: "FATAL", Code: "57P01"}, false},
		{syscall.ECONNREFUSED, false},
		{&hosthealth.RoleError{Addr: "db1:5432", Role: hosthealth.RoleReplica, Target: hosthealth.TargetPrimary}, false},
	}
	for _, r := range rows {
		if got := EndsConnect(r.err, hosthealth.TargetPrimary); got != r.want {
			t.Errorf("EndsConnect(%v) = %v, want %v", r.err, got, r.want)
		}
	}
}

// TestDescribe is what Describe reads from an error, for each error a
// call meets.
func TestDescribe(t *testing.T) {
	standby := &pgconn.PgError{Code: "25006"}
	roleErr := &hosthealth.RoleError{Addr: "db:5432", Role: hosthealth.RoleReplica, Target: hosthealth.TargetPrimary}
	rows := []struct {
		name   string
		err    error
		target hosthealth.Target
		want   Failure
		report error
	}{
		{"a standby refused a write", standby, hosthealth.TargetPrimary,
			Failure{Class: hosthealth.Topology, DidNotRun: true, Answered: true, Rule: WriteOnce}, standby},
		{"by the application's choice", &ByChoiceError{Err: standby}, hosthealth.TargetPrimary,
			Failure{Class: hosthealth.Topology, ByChoice: true, DidNotRun: true, Answered: true, Rule: WriteOnce}, standby},
		{"under a target that takes standbys", standby, hosthealth.TargetAny,
			Failure{Class: hosthealth.Topology, TakesReads: true, DidNotRun: true, Answered: true, Rule: WriteOnce}, standby},
		{"refused for its role", roleErr, hosthealth.TargetPrimary,
			Failure{Class: hosthealth.Topology, RoleRefused: true, Rule: WriteOnce}, roleErr},
		{"end of file", io.EOF, hosthealth.TargetPrimary,
			Failure{Class: hosthealth.Transport, Rule: WriteOnce}, io.EOF},
		{"starting up", &pgconn.PgError{Code: "57P03"}, hosthealth.TargetPrimary,
			Failure{Class: hosthealth.Transient, DidNotRun: true, Answered: true, Rule: WriteOnce}, nil},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			got, report := Describe(r.err, Call, WriteOnce, r.target)
			if got != r.want {
				t.Errorf("Describe = %+v, want %+v", got, r.want)
			}
			if r.report != nil && report != r.report {
				t.Errorf("reports %v, want %v", report, r.report)
			}
		})
	}
}

// decideCallFor is Decide for a Pool call: its verdict and whether the
// attempt counts.
func decideCallFor(f Failure) (Verdict, bool) {
	d := Decide(f)
	return d.Verdict, d.Counts
}

// TestDecidePaths is the decision for each path that sends SQL, one row
// per row of docs/how-failover-works.md's table "What moves to another host, and what does
// not" and per pinned phase: a statement inside a transaction, COMMIT, and
// a statement on a held connection (database/sql).
func TestDecidePaths(t *testing.T) {
	eof := fmt.Errorf("read: %w", io.ErrUnexpectedEOF)
	terminated := &pgconn.PgError{Severity: "FATAL", Code: "57P01"}
	unique := &pgconn.PgError{Severity: "ERROR", Code: "23505"}
	serialization := &pgconn.PgError{Severity: "ERROR", Code: "40001"}
	standby := &pgconn.PgError{Severity: "ERROR", Code: "25006"}
	notSent := &NotSentError{Err: pgconn.ErrConnClosed}
	notSentIdle := &NotSentError{Err: fmt.Errorf("closed while idle: %w", io.EOF)}
	rows := []struct {
		name       string
		phase      Phase
		rule       Rule
		err        error
		callerDone bool
		want       Verdict
		mark       bool
	}{
		// acquiring a connection, BEGIN, Ping: always moves.
		{"acquire, BEGIN, Ping: a refused dial", Call, Idempotent, &pgconn.ConnectError{}, false, TryNext, true},
		{"acquire, BEGIN, Ping: a cut", Call, Idempotent, eof, false, TryNext, true},
		// Query, SendBatch of replay-safe reads.
		{"replay-safe Query cut before a row", Call, Idempotent, eof, false, TryNext, true},
		{"replay-safe Query cut after a row", Call, Idempotent.Delivered(), eof, false, FailHost, true},
		// QueryRow of a replay-safe read: moves until the query completed.
		{"replay-safe QueryRow cut", Call, Idempotent, terminated, false, TryNext, true},
		// Exec, CopyFrom, any statement that may write.
		{"write never sent", Call, WriteOnce, &pgconn.ConnectError{}, false, TryNext, true},
		{"write refused by a standby", Call, WriteOnce, standby, false, TryNext, true},
		{"write cut in flight", Call, WriteOnce, eof, false, FailUnknown, true},
		{"write answered with an error", Call, WriteOnce, unique, false, PassThrough, false},
		{"write the caller gave up on", Call, WriteOnce, context.DeadlineExceeded, true, FailUnknown, false},
		{"COPY cut after its rows were read", Call, MayWrite, eof, false, FailUnknown, true},
		// Statements inside a transaction: never moved.
		{"statement in a transaction cut", InTx, WriteOnce, eof, false, FailInterrupted, true},
		{"read in a transaction cut by a terminate", InTx, ReadOnce, terminated, false, FailInterrupted, true},
		{"statement in a transaction refused", InTx, WriteOnce, unique, false, PassThrough, false},
		{"statement in a transaction refused read-only", InTx, WriteOnce, standby, false, PassThrough, false},
		{"statement in a transaction past the caller's deadline", InTx, WriteOnce, context.DeadlineExceeded, true, PassThrough, false},
		{"COMMIT cut in flight", Commit, WriteOnce, eof, false, FailUnknown, true},
		{"COMMIT answered by a terminate", Commit, WriteOnce, terminated, false, FailUnknown, true},
		{"COMMIT the caller gave up on", Commit, WriteOnce, context.Canceled, true, FailUnknown, false},
		{"COMMIT refused (serialization)", Commit, WriteOnce, serialization, false, PassThrough, false},
		{"COMMIT refused as its caller gave up", Commit, WriteOnce, serialization, true, PassThrough, false},
		{"COMMIT never sent: connection closed before", Commit, WriteOnce, notSent, false, FailInterrupted, true},
		{"COMMIT never sent: the caller had given up", Commit, WriteOnce, notSent, true, FailInterrupted, false},
		{"COMMIT never sent: closed while idle", Commit, WriteOnce, notSentIdle, false, FailInterrupted, true},
		// Statements on a held connection (database/sql outside a
		// transaction): never moved.
		{"held write cut", Held, WriteOnce, eof, false, FailUnknown, true},
		{"held write answered by a terminate", Held, WriteOnce, terminated, false, FailUnknown, true},
		{"held write the caller gave up on", Held, WriteOnce, context.Canceled, true, FailUnknown, false},
		{"held write refused", Held, WriteOnce, unique, false, PassThrough, false},
		{"held write refused, caller gone", Held, WriteOnce, unique, true, PassThrough, false},
		{"held write refused by a standby", Held, WriteOnce, standby, false, PassThrough, false},
		{"held write never sent", Held, WriteOnce, notSent, false, PassThrough, true},
		{"held read cut", Held, ReadOnce, eof, false, PassThrough, true},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			f, _ := Describe(r.err, r.phase, r.rule, hosthealth.TargetPrimary)
			f.CallerDone = r.callerDone
			f.MaxAttempts, f.TimeLeft = 8, true
			d := Decide(f)
			if d.Verdict != r.want || d.Mark != r.mark {
				t.Errorf("Decide = %v (mark %v), want %v (mark %v)", d.Verdict, d.Mark, r.want, r.mark)
			}
		})
	}
}
