// Command pgcluster runs a program against a throwaway PostgreSQL cluster
// and lets it ask for a failover. It is how the examples that live in
// modules of their own (examples/databasesql, examples/river,
// examples/observability), which cannot import internal/pgtest, get real
// servers and a real failover:
//
//	go run ./internal/pgtest/cmd/pgcluster -- go -C examples/river run .
//
// It starts a primary and -replicas streaming replicas on loopback
// (synchronous replication unless -async), installing PostgreSQL first
// where internal/pgtest can, and runs the program with two variables set:
//
//   - PGFAILOVER_DSN: the multi-host connection string of the cluster;
//   - PGFAILOVER_DRILL_URL: a loopback URL; a POST to it kills the primary
//     (immediate shutdown), promotes the standby with the most WAL, points
//     the others at it, and answers with the new primary's host:port once
//     it accepts writes.
//
// In production the failover is Patroni's or an operator's; the drill URL
// stands for it. pgcluster exits with the program's status, after closing
// the cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"time"

	"github.com/pgfailover/pgfailover/internal/pgtest"
)

func main() {
	replicas := flag.Int("replicas", 2, "streaming replicas beside the primary")
	async := flag.Bool("async", false, "asynchronous replication (writes acknowledged before a standby has them)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: pgcluster [-replicas N] [-async] -- program [args...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	code, err := run(ctx, pgtest.Options{Replicas: *replicas, SyncReplication: !*async}, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgcluster:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// run starts the cluster and the drill endpoint, runs args and returns its
// exit status.
func run(ctx context.Context, opts pgtest.Options, args []string) (int, error) {
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	c, err := pgtest.New(startCtx, opts)
	cancel()
	if err != nil {
		return 1, err
	}
	defer c.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 1, err
	}
	srv := &http.Server{Handler: drill(c)}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	defer func() {
		srv.Close()
		wg.Wait()
	}()

	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"PGFAILOVER_DSN="+c.ConnString(""),
		"PGFAILOVER_DRILL_URL=http://"+ln.Addr().String()+"/failover")
	err = cmd.Run()
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return exit.ExitCode(), nil
	}
	return 0, err
}

// drill serves POST /failover: one failover at a time.
func drill(c *pgtest.Cluster) http.Handler {
	var mu sync.Mutex // one failover at a time
	mux := http.NewServeMux()
	mux.HandleFunc("POST /failover", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		next, err := c.FailoverToBest(r.Context(), 0)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, next.Addr())
	})
	return mux
}
