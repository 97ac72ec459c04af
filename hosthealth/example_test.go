package hosthealth_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/hosthealth"
)

func show(tr *hosthealth.Tracker, step string) {
	fmt.Println(step)
	for _, i := range tr.Ranking() {
		s := tr.Status(i)
		fmt.Printf("  %-10s %-16s %s\n", s.Addr, s.State, s.Role)
	}
}

// A writer follows the primary through a failover.
func Example() {
	tr := hosthealth.NewTracker([]hosthealth.Host{
		{Addr: "db-a:5432"}, {Addr: "db-b:5432"}, {Addr: "db-c:5432"},
	}, hosthealth.Options{Target: hosthealth.TargetPrimary})

	// Start-up: every host is probed once.
	tr.ObserveConnect(0, hosthealth.RolePrimary)
	tr.ObserveConnect(1, hosthealth.RoleReplica)
	tr.ObserveConnect(2, hosthealth.RoleReplica)
	show(tr, "probed:")

	// db-a crashes under a running query and pgx reports an unexpected
	// EOF. Mark the host before picking the next one.
	tr.ObserveFailure(tr.Pick(), hosthealth.Classify(io.ErrUnexpectedEOF))
	show(tr, "db-a lost:")

	// The walk tries db-a (refused) and then db-b, which has been
	// promoted in the meantime.
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tr.ObserveFailure(0, hosthealth.Classify(refused))
	tr.ObserveConnect(1, hosthealth.RolePrimary)
	show(tr, "db-b promoted:")

	// db-a comes back as a standby of db-b.
	tr.ObserveConnect(0, hosthealth.RoleReplica)
	show(tr, "db-a rejoined:")
	fmt.Println("writes go to", tr.Status(tr.Pick()).Addr)

	// Output:
	// probed:
	//   db-a:5432  healthy          primary
	//   db-b:5432  topology-reject  replica
	//   db-c:5432  topology-reject  replica
	// db-a lost:
	//   db-a:5432  transport-error  primary
	//   db-b:5432  topology-reject  replica
	//   db-c:5432  topology-reject  replica
	// db-b promoted:
	//   db-b:5432  healthy          primary
	//   db-a:5432  transport-error  primary
	//   db-c:5432  topology-reject  replica
	// db-a rejoined:
	//   db-b:5432  healthy          primary
	//   db-a:5432  topology-reject  replica
	//   db-c:5432  topology-reject  replica
	// writes go to db-b:5432
}

// Reads prefer replicas in the client's zone. A healthy local replica
// stays first across outages; remote replicas are reset to Unknown when a
// new outage starts, so local ones get tried again first.
func ExampleTracker_zones() {
	tr := hosthealth.NewTracker([]hosthealth.Host{
		{Addr: "r1:5432", Zone: "eu-1a"},
		{Addr: "r2:5432", Zone: "eu-1b"},
		{Addr: "r3:5432"}, // zone advertised by the server later
	}, hosthealth.Options{Target: hosthealth.TargetReplica, Zone: "eu-1a"})

	tr.ObserveConnect(0, hosthealth.RoleReplica)
	tr.ObserveConnect(1, hosthealth.RoleReplica)
	tr.ObserveConnect(2, hosthealth.RoleReplica)
	tr.ObserveZone(2, "EU-1A") // zones compare case-insensitively
	show(tr, "all up:")

	// r3 refuses connections while it restarts.
	tr.ObserveFailure(2, hosthealth.Classify(&pgconn.PgError{Code: "57P03"}))
	show(tr, "r3 restarting:")

	// r3 is back. r2 is probed again and found healthy.
	tr.ObserveConnect(2, hosthealth.RoleReplica)
	tr.ObserveConnect(1, hosthealth.RoleReplica)
	show(tr, "r3 back:")

	// Output:
	// all up:
	//   r1:5432    healthy          replica
	//   r3:5432    healthy          replica
	//   r2:5432    healthy          replica
	// r3 restarting:
	//   r1:5432    healthy          replica
	//   r2:5432    unknown          replica
	//   r3:5432    transient-reject replica
	// r3 back:
	//   r1:5432    healthy          replica
	//   r3:5432    healthy          replica
	//   r2:5432    healthy          replica
}

func ExampleClassify() {
	for _, err := range []error{
		&pgconn.PgError{Code: "28P01"},                           // invalid_password
		fmt.Errorf("insert: %w", &pgconn.PgError{Code: "25006"}), // write on a standby
		&pgconn.PgError{Code: "57P03"},                           // starting up
		&pgconn.PgError{Code: "57P01"},                           // terminated by an administrator
		io.ErrUnexpectedEOF,
		&pgconn.PgError{Code: "23505"}, // unique_violation: an ordinary SQL error
		context.Canceled,
	} {
		fmt.Println(hosthealth.Classify(err))
	}
	// Output:
	// terminal
	// topology
	// transient
	// transport
	// transport
	// not-failover
	// not-failover
}

func ExampleParseTarget() {
	t, err := hosthealth.ParseTarget("standby")
	fmt.Println(t, err)
	fmt.Println(t.Accepts(hosthealth.RolePrimary), t.Accepts(hosthealth.RoleReplica))
	_, err = hosthealth.ParseTarget("master")
	fmt.Println(err)
	// Output:
	// read-only <nil>
	// false true
	// invalid target "master": accepted values are any, read-write, primary, read-only, standby, replica, prefer-standby, prefer-replica
}
