// Command pginstall makes sure the programs the integration tests and
// examples/demo need are on this machine, through internal/pgtest's one
// installer: the PostgreSQL server programs, and with -patroni also
// Patroni and etcd. As root on Debian or Ubuntu it installs what is missing
// with apt-get; elsewhere it prints the command that installs it and exits
// with status 1.
//
//	go run ./internal/pgtest/cmd/pginstall -patroni
//
// .ci/run uses it. The tests and the demo do the same by themselves when
// they start a cluster; running it first only moves the wait.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/pgfailover/pgfailover/internal/pgtest"
)

func main() {
	patroni := flag.Bool("patroni", false, "also Patroni and etcd")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := run(ctx, *patroni); err != nil {
		fmt.Fprintln(os.Stderr, "pginstall:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, patroni bool) error {
	dir, err := pgtest.EnsureServer(ctx, os.Stdout)
	if err != nil {
		return err
	}
	fmt.Println("pginstall: PostgreSQL server programs in", dir)
	if !patroni {
		return nil
	}
	progs, err := pgtest.EnsurePatroni(ctx, os.Stdout)
	if err != nil {
		return err
	}
	fmt.Println("pginstall: patroni", progs["patroni"], "etcd", progs["etcd"])
	return nil
}
