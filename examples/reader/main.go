// Command reader shows reads spread over replicas with pool.Reader():
// where reads go, read-your-writes after a write, and a causal token
// carried from a write to a later read.
//
//	go run ./examples/reader 'postgres://app:secret@db-a:5432,db-b:5432,db-c:5432/app?max_lag=5s'
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
		fmt.Fprintln(os.Stderr, "usage: reader CONNECTION-STRING")
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
	pool, err := failover.New(ctx, connString)
	if err != nil {
		return err
	}
	defer pool.Close()
	reader := pool.Reader()

	// Which server answers: a replica, unless none is fresh enough.
	where := func(ctx context.Context) (string, error) {
		var port int
		var standby bool
		err := reader.QueryRow(ctx, "SELECT current_setting('port')::int, pg_is_in_recovery()").Scan(&port, &standby)
		role := "primary"
		if standby {
			role = "replica"
		}
		return fmt.Sprintf("%s (port %d)", role, port), err
	}
	for i := range 4 {
		w, err := where(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "read %d: %s\n", i+1, w)
	}

	// Read-your-writes: a read right after a write through the Pool sees
	// it, on a replica that has replayed it or else on the primary.
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS visits (at timestamptz)"); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "INSERT INTO visits VALUES (now())"); err != nil {
		return err
	}
	var seen int
	var port int
	var standby bool
	if err := reader.QueryRow(ctx, "SELECT count(*), current_setting('port')::int, pg_is_in_recovery() FROM visits").Scan(&seen, &port, &standby); err != nil {
		return err
	}
	role := "primary"
	if standby {
		role = "replica"
	}
	fmt.Fprintf(out, "read right after a write sees %d visit(s), on the %s (port %d)\n", seen, role, port)

	// A causal token: the write records the primary's WAL position, and a
	// read that carries it goes to any replica that has replayed it.
	tok := new(failover.CausalToken)
	if _, err := pool.Exec(failover.WithCausalToken(ctx, tok), "INSERT INTO visits VALUES (now())"); err != nil {
		return err
	}
	fmt.Fprintf(out, "the write's position: %s\n", tok)
	later, err := failover.ParseCausalToken(tok.String()) // as a later request would
	if err != nil {
		return err
	}
	var visits int
	if err := reader.QueryRow(failover.WithCausalToken(ctx, later), "SELECT count(*) FROM visits").Scan(&visits); err != nil {
		return err
	}
	fmt.Fprintf(out, "a read with the token sees %d visit(s)\n", visits)

	for _, h := range pool.Stat().Hosts() {
		stale := "unknown"
		if h.StalenessKnown {
			stale = "at most " + h.Staleness.Round(time.Millisecond).String()
		}
		fmt.Fprintf(out, "  %-22s %-8s staleness %s\n", h.Addr, h.Role, stale)
	}
	return nil
}
