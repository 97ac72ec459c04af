// Command basic shows the one-line change from pgxpool to pgfailover.
//
//	go run ./examples/basic 'postgres://app:secret@db-a:5432,db-b:5432/app'
package main

import (
	"context"
	"fmt"
	"io"
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
	if err := run(ctx, os.Args[1], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, connString string, out io.Writer) error {
	// Before: pool, err := pgxpool.New(ctx, connString)
	pool, err := failover.New(ctx, connString)
	if err != nil {
		return err
	}
	defer pool.Close()

	// Everything else is pgxpool's API.
	var now time.Time
	var inRecovery bool
	if err := pool.QueryRow(ctx, "SELECT now(), pg_is_in_recovery()").Scan(&now, &inRecovery); err != nil {
		return err
	}
	fmt.Fprintf(out, "connected; server time %s; standby: %v\n", now.Format(time.RFC3339), inRecovery)
	for _, h := range pool.Stat().Hosts() {
		fmt.Fprintf(out, "  %-22s %-8s %s\n", h.Addr, h.Role, h.State)
	}
	return nil
}
