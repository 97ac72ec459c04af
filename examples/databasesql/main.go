// Command databasesql shows a database/sql application on pgfailover:
// goose migrations, then sqlx queries, through a failover.
//
// It takes the cluster from the environment, as pgcluster sets it:
//
//	go run ./internal/pgtest/cmd/pgcluster -- go -C examples/databasesql run .
//
// PGFAILOVER_DSN is the multi-host connection string; a POST to
// PGFAILOVER_DRILL_URL kills the primary and promotes a replica (in
// production, Patroni or an operator does that). It exits 0 when the
// migrations and writes went on across the failover and every
// acknowledged order is on the new primary exactly once.
package main

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"

	"github.com/pgfailover/pgfailover/failover"
	_ "github.com/pgfailover/pgfailover/failover/stdlib" // registers the "pgfailover" driver
)

//go:embed migrations/*.sql
var migrations embed.FS

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, os.Getenv("PGFAILOVER_DSN"), os.Getenv("PGFAILOVER_DRILL_URL")); err != nil {
		fmt.Fprintln(os.Stderr, "databasesql:", err)
		os.Exit(1)
	}
}

// Order is one row of orders, as sqlx scans it.
type Order struct {
	ID         int64     `db:"id"`
	Customer   string    `db:"customer"`
	TotalCents int64     `db:"total_cents"`
	PlacedAt   time.Time `db:"placed_at"`
}

func run(ctx context.Context, dsn, drillURL string) error {
	if dsn == "" || drillURL == "" {
		return errors.New("set PGFAILOVER_DSN and PGFAILOVER_DRILL_URL (run it through internal/pgtest/cmd/pgcluster)")
	}
	// Tools configured by a connection string alone open the driver by
	// name; the string takes pgfailover's keys.
	sqlDB, err := sql.Open("pgfailover", dsn+"&failover_max_duration=20s")
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	// sqlx picks its placeholders by driver name and does not know
	// "pgfailover": sqlx.Open("pgfailover", dsn) would bind ?, and
	// NamedExec would fail with a syntax error (42601). Wrapping the DB
	// under pgx's name gives $1 placeholders. Code that must call
	// sqlx.Open itself registers the name once instead:
	//
	//	sqlx.BindDriver("pgfailover", sqlx.DOLLAR)
	db := sqlx.NewDb(sqlDB, "pgx")
	if db.Rebind("?") != "$1" {
		return errors.New("sqlx binds the wrong placeholders")
	}

	goose.SetBaseFS(migrations)
	goose.SetLogger(goose.NopLogger())
	if err := goose.SetDialect("postgres"); err != nil {
		return err
	}
	if err := goose.UpToContext(ctx, sqlDB, "migrations", 1); err != nil {
		return fmt.Errorf("first migration: %w", err)
	}
	fmt.Println("migrated to version 1 on the first primary")

	w := &writers{db: db}
	w.start(ctx, 3)
	if err := w.waitOK(ctx, 100); err != nil {
		return err
	}
	promoted, err := failoverNow(ctx, drillURL)
	if err != nil {
		w.stop()
		return err
	}
	fmt.Println("failover: the new primary is", promoted)
	if err := w.waitOK(ctx, w.ok.Load()+100); err != nil {
		return err
	}
	w.stop()

	// The second migration runs on the new primary; goose's version table
	// came across with the data.
	if err := goose.UpContext(ctx, sqlDB, "migrations"); err != nil {
		return fmt.Errorf("second migration after the failover: %w", err)
	}
	version, err := goose.GetDBVersionContext(ctx, sqlDB)
	if err != nil {
		return err
	}
	fmt.Println("migrated to version", version, "on the new primary")
	return w.check(ctx, promoted)
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

// writers place orders through sqlx from several goroutines and keep the
// outcome of each.
type writers struct {
	db     *sqlx.DB
	nextID atomic.Int64
	ok     atomic.Int64
	halt   chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	acked   []int64
	unknown []int64 // cut in flight: failover.ErrCommitOutcomeUnknown
	failed  []error // anything else
}

func (w *writers) start(ctx context.Context, n int) {
	w.halt = make(chan struct{})
	for range n {
		w.wg.Go(func() {
			for {
				select {
				case <-w.halt:
					return
				case <-ctx.Done():
					return
				default:
				}
				o := Order{ID: w.nextID.Add(1), Customer: "c-" + fmt.Sprint(w.nextID.Load()%7)}
				_, err := w.db.NamedExecContext(ctx, "INSERT INTO orders (id, customer) VALUES (:id, :customer)", o)
				w.mu.Lock()
				switch {
				case err == nil:
					w.acked = append(w.acked, o.ID)
					w.ok.Add(1)
				case errors.Is(err, failover.ErrCommitOutcomeUnknown):
					w.unknown = append(w.unknown, o.ID)
				default:
					w.failed = append(w.failed, err)
				}
				w.mu.Unlock()
			}
		})
	}
}

func (w *writers) stop() {
	close(w.halt)
	w.wg.Wait()
}

// waitOK waits until n orders were acknowledged.
func (w *writers) waitOK(ctx context.Context, n int64) error {
	for w.ok.Load() < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d orders acknowledged, waiting for %d: %w", w.ok.Load(), n, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// check reads the orders back with sqlx and compares them with the
// outcomes the writers saw.
func (w *writers) check(ctx context.Context, primary string) error {
	var port int
	if err := w.db.GetContext(ctx, &port, "SELECT current_setting('port')::int"); err != nil {
		return err
	}
	if !strings.HasSuffix(primary, fmt.Sprintf(":%d", port)) {
		return fmt.Errorf("sqlx reads from port %d, not the new primary %s", port, primary)
	}
	var orders []Order
	if err := w.db.SelectContext(ctx, &orders, "SELECT id, customer, total_cents, placed_at FROM orders ORDER BY id"); err != nil {
		return err
	}
	seen := make(map[int64]int, len(orders))
	for _, o := range orders {
		seen[o.ID]++
	}
	var problems []string
	for _, id := range w.acked {
		if seen[id] != 1 {
			problems = append(problems, fmt.Sprintf("acknowledged order %d is there %d times", id, seen[id]))
		}
	}
	committed := 0
	for _, id := range w.unknown {
		committed += seen[id]
	}
	for _, err := range w.failed {
		problems = append(problems, "a write failed: "+err.Error())
	}
	fmt.Printf("%d orders acknowledged, %d cut in flight (ErrCommitOutcomeUnknown; %d of them committed), %d other failures\n",
		len(w.acked), len(w.unknown), committed, len(w.failed))
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	fmt.Println("every acknowledged order is on the new primary exactly once")
	return nil
}
