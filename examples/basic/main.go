// Command basic shows the one-line change from pgxpool to pgfailover.
//
//	go run ./examples/basic 'postgres://app:secret@db-a:5432,db-b:5432/app'
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/pgfailover/pgfailover/failover"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: basic CONNECTION-STRING")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Before: pool, err := pgxpool.New(ctx, os.Args[1])
	pool, err := failover.New(ctx, os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer pool.Close()

	// Everything else is pgxpool's API.
	var now time.Time
	var inRecovery bool
	if err := pool.QueryRow(ctx, "SELECT now(), pg_is_in_recovery()").Scan(&now, &inRecovery); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("connected; server time %s; standby: %v\n", now.Format(time.RFC3339), inRecovery)
	for _, h := range pool.Stat().Hosts() {
		fmt.Printf("  %-22s %-8s %s\n", h.Addr, h.Role, h.State)
	}
}
