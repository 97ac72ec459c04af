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

// show prints the current ranking for target, best first, with the state
// each host ranks with and the role its server reported.
func show(s *hosthealth.Snapshot, target hosthealth.Target, step string) {
	fmt.Println(step)
	for _, i := range s.Ranking(target) {
		h := s.Host(i)
		fmt.Printf("  %-10s %-16s %s\n", h.Addr, s.State(i, target), h.Role)
	}
}

// A writer follows the primary through a failover.
func Example() {
	s := hosthealth.New([]hosthealth.HostSpec{
		{Addr: "db-a:5432"}, {Addr: "db-b:5432"}, {Addr: "db-c:5432"},
	}, hosthealth.Options{})
	w := hosthealth.TargetPrimary

	// Start-up: every host is probed once.
	s = s.ObserveConnect("db-a:5432", hosthealth.RolePrimary)
	s = s.ObserveConnect("db-b:5432", hosthealth.RoleReplica)
	s = s.ObserveConnect("db-c:5432", hosthealth.RoleReplica)
	show(s, w, "probed:")

	// db-a crashes under a running query and pgx reports an unexpected
	// EOF. Mark the host before picking the next one.
	s = s.ObserveFailure(s.Host(s.Pick(w)).Addr, hosthealth.Classify(io.ErrUnexpectedEOF))
	show(s, w, "db-a lost:")

	// The walk tries db-a (refused) and then db-b, which has been
	// promoted in the meantime.
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	s = s.ObserveFailure("db-a:5432", hosthealth.Classify(refused))
	s = s.ObserveConnect("db-b:5432", hosthealth.RolePrimary)
	show(s, w, "db-b promoted:")

	// db-a comes back as a standby of db-b.
	s = s.ObserveConnect("db-a:5432", hosthealth.RoleReplica)
	show(s, w, "db-a rejoined:")
	fmt.Println("writes go to", s.Host(s.Pick(w)).Addr)

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
func Example_zones() {
	s := hosthealth.New([]hosthealth.HostSpec{
		{Addr: "r1:5432", Zone: "eu-1a"},
		{Addr: "r2:5432", Zone: "eu-1b"},
		{Addr: "r3:5432"}, // zone advertised by the server later
	}, hosthealth.Options{Zone: "eu-1a"})
	r := hosthealth.TargetReplica

	s = s.ObserveConnect("r1:5432", hosthealth.RoleReplica)
	s = s.ObserveConnect("r2:5432", hosthealth.RoleReplica)
	s = s.ObserveConnect("r3:5432", hosthealth.RoleReplica)
	s = s.ObserveZone("r3:5432", "EU-1A") // zones compare case-insensitively
	show(s, r, "all up:")

	// r3 refuses connections while it restarts.
	s = s.ObserveFailure("r3:5432", hosthealth.Classify(&pgconn.PgError{Code: "57P03"}))
	show(s, r, "r3 restarting:")

	// r3 is back. r2 is probed again and found healthy.
	s = s.ObserveConnect("r3:5432", hosthealth.RoleReplica)
	s = s.ObserveConnect("r2:5432", hosthealth.RoleReplica)
	show(s, r, "r3 back:")

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

// One state serves every target: the facts are shared, and each target
// ranks them its own way.
func ExampleSnapshot_Ranking() {
	s := hosthealth.New([]hosthealth.HostSpec{
		{Addr: "p:5432"}, {Addr: "r1:5432"}, {Addr: "r2:5432"},
	}, hosthealth.Options{})
	s = s.ObserveConnect("p:5432", hosthealth.RolePrimary)
	s = s.ObserveConnect("r1:5432", hosthealth.RoleReplica)
	s = s.ObserveFailure("r2:5432", hosthealth.Transport)

	for _, target := range []hosthealth.Target{
		hosthealth.TargetPrimary, hosthealth.TargetAny, hosthealth.TargetReplica, hosthealth.TargetPreferReplica,
	} {
		fmt.Printf("%-15s", target)
		for _, i := range s.Ranking(target) {
			fmt.Printf(" %s(%s)", s.Host(i).Addr, s.State(i, target))
		}
		fmt.Println()
	}
	// Output:
	// read-write      p:5432(healthy) r2:5432(transport-error) r1:5432(topology-reject)
	// any             p:5432(healthy) r1:5432(healthy) r2:5432(transport-error)
	// read-only       r1:5432(healthy) r2:5432(transport-error) p:5432(topology-reject)
	// prefer-standby  r1:5432(healthy) r2:5432(transport-error) p:5432(topology-reject)
}

// A topology source such as Patroni replaces the host set. Hosts that
// stay keep what was learnt about them; new ones start Unknown, ranked by
// the role the source claims for them until their server says otherwise.
func ExampleSnapshot_SetHosts() {
	s := hosthealth.New([]hosthealth.HostSpec{
		{Addr: "a:5432"}, {Addr: "b:5432"},
	}, hosthealth.Options{})
	s = s.ObserveConnect("a:5432", hosthealth.RolePrimary)
	s = s.ObserveFailure("b:5432", hosthealth.Transport)

	// b is decommissioned and c joins as a replica.
	s = s.SetHosts([]hosthealth.HostSpec{
		{Addr: "a:5432", Claimed: hosthealth.RolePrimary},
		{Addr: "c:5432", Claimed: hosthealth.RoleReplica},
	})
	s = s.ObserveFailure("b:5432", hosthealth.Transport) // a call in flight on b: ignored

	for _, h := range s.Hosts() {
		fmt.Printf("%s %s, role %s, claimed %s\n", h.Addr, h.State, h.Role, h.Claimed)
	}
	_, ok := s.Lookup("b:5432")
	fmt.Println("b tracked:", ok)
	c, _ := s.Lookup("c:5432")
	fmt.Println("c for writes:", s.State(c, hosthealth.TargetPrimary))
	fmt.Println("c for reads:", s.State(c, hosthealth.TargetReplica))
	// Output:
	// a:5432 healthy, role primary, claimed primary
	// c:5432 unknown, role unknown, claimed replica
	// b tracked: false
	// c for writes: topology-reject
	// c for reads: unknown
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

// DidNotRun tells whether a statement may be sent again elsewhere: only
// when the error proves the server did not run it.
func ExampleDidNotRun() {
	for _, err := range []error{
		fmt.Errorf("insert: %w", &pgconn.PgError{Code: "25006"}), // refused by a standby
		&pgconn.PgError{Code: "57P03"},                           // starting up
		&pgconn.PgError{Code: "23505"},                           // it ran, and failed
		io.ErrUnexpectedEOF,                                      // the answer was lost: it may have run
	} {
		fmt.Println(hosthealth.DidNotRun(err))
	}
	// Output:
	// true
	// true
	// false
	// false
}

func ExampleReportedRole() {
	// The in_hot_standby parameter status, as pgconn's ParameterStatus
	// returns it; "" from a server older than PostgreSQL 14.
	for _, v := range []string{"on", "off", ""} {
		fmt.Printf("%q: %s\n", v, hosthealth.ReportedRole(v))
	}
	// Output:
	// "on": replica
	// "off": primary
	// "": unknown
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
