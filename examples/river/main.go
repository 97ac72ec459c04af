// Command river shows River workers on pgfailover: River takes a concrete
// *pgxpool.Pool, and pool.PgxPool() is one whose new connections follow the
// primary.
//
//	go run ./internal/pgtest/cmd/pgcluster -- go -C examples/river run .
//
// PGFAILOVER_DSN is the multi-host connection string; a POST to
// PGFAILOVER_DRILL_URL kills the primary and promotes a replica (in
// production, Patroni or an operator does that).
//
// A job is inserted before the failover into a queue no worker serves yet;
// after the failover the queue is started, and the job must be worked
// exactly once, on the new primary. Jobs of the default queue run before
// and after. The worker completes each job in the same transaction as its
// own write (river.JobCompleteTx), so a job's effect is recorded once even
// if River were to run it again.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/pgfailover/pgfailover/failover"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, os.Getenv("PGFAILOVER_DSN"), os.Getenv("PGFAILOVER_DRILL_URL")); err != nil {
		fmt.Fprintln(os.Stderr, "river:", err)
		os.Exit(1)
	}
}

// ReportArgs is the job: write one row into reports.
type ReportArgs struct {
	Name string `json:"name"`
}

func (ReportArgs) Kind() string { return "report" }

// ReportWorker writes the report and completes the job in one transaction.
type ReportWorker struct {
	river.WorkerDefaults[ReportArgs]
	pool *failover.Pool
}

func (w *ReportWorker) Work(ctx context.Context, job *river.Job[ReportArgs]) error {
	return pgx.BeginFunc(ctx, w.pool.PgxPool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO reports (job_id, name) VALUES ($1, $2)", job.ID, job.Args.Name); err != nil {
			return err
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

const laterQueue = "after_failover"

func run(ctx context.Context, dsn, drillURL string) error {
	if dsn == "" || drillURL == "" {
		return errors.New("set PGFAILOVER_DSN and PGFAILOVER_DRILL_URL (run it through internal/pgtest/cmd/pgcluster)")
	}
	pool, err := failover.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool.PgxPool())

	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE reports (job_id bigint, name text)"); err != nil {
		return err
	}

	workers := river.NewWorkers()
	river.AddWorker(workers, &ReportWorker{pool: pool})
	client, err := river.NewClient(driver, &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers: workers,
		// River logs the failover's connection errors as it rides them
		// out; only the outcome is of interest here.
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	}()

	before, err := client.Insert(ctx, ReportArgs{Name: "before"}, nil)
	if err != nil {
		return err
	}
	if err := waitCompleted(ctx, client, before.Job.ID); err != nil {
		return err
	}
	fmt.Println("job", before.Job.ID, "worked before the failover")

	across, err := client.Insert(ctx, ReportArgs{Name: "across"}, &river.InsertOpts{Queue: laterQueue})
	if err != nil {
		return err
	}
	fmt.Println("job", across.Job.ID, "inserted; killing the primary")
	promoted, err := failoverNow(ctx, drillURL)
	if err != nil {
		return err
	}
	fmt.Println("failover: the new primary is", promoted)

	if err := client.Queues().Add(laterQueue, river.QueueConfig{MaxWorkers: 1}); err != nil {
		return err
	}
	after, err := client.Insert(ctx, ReportArgs{Name: "after"}, nil)
	if err != nil {
		return fmt.Errorf("insert after the failover: %w", err)
	}
	for _, id := range []int64{across.Job.ID, after.Job.ID} {
		if err := waitCompleted(ctx, client, id); err != nil {
			return err
		}
	}
	fmt.Println("jobs", across.Job.ID, "and", after.Job.ID, "worked after the failover")

	var port, times int
	if err := pool.QueryRow(ctx, "SELECT current_setting('port')::int, (SELECT count(*) FROM reports WHERE job_id = $1)", across.Job.ID).Scan(&port, &times); err != nil {
		return err
	}
	if !strings.HasSuffix(promoted, fmt.Sprintf(":%d", port)) {
		return fmt.Errorf("the pool writes to port %d, not the new primary %s", port, promoted)
	}
	if times != 1 {
		return fmt.Errorf("job %d was worked %d times, want exactly once", across.Job.ID, times)
	}
	fmt.Println("the job inserted before the failover was worked exactly once, on the new primary")
	return nil
}

// waitCompleted polls River until the job is completed, or fails when it
// was discarded or cancelled.
func waitCompleted(ctx context.Context, client *river.Client[pgx.Tx], id int64) error {
	for {
		job, err := client.JobGet(ctx, id)
		if err == nil {
			switch job.State {
			case rivertype.JobStateCompleted:
				return nil
			case rivertype.JobStateDiscarded, rivertype.JobStateCancelled:
				return fmt.Errorf("job %d ended %s: %v", id, job.State, job.Errors)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %d not completed (last error %v): %w", id, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// failoverNow asks pgcluster for a failover and returns the new primary.
func failoverNow(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("failover: %s: %s", resp.Status, body)
	}
	return strings.TrimSpace(string(body)), nil
}
