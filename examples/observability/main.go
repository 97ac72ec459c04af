// Command observability serves what an operator scrapes from a Pool: the
// library's metrics on /metrics, through the OpenTelemetry Prometheus
// exporter, and each host's health and pools on /hosts as JSON, while a
// little write and read load runs.
//
//	go run ./internal/pgtest/cmd/pgcluster -- go -C examples/observability run .
//
// PGFAILOVER_DSN is the multi-host connection string (or -dsn). When
// PGFAILOVER_DRILL_URL is set (or with -check), the program checks itself
// and exits: it asks the drill URL for a failover (a POST kills the primary
// and promotes a replica; in production Patroni or an operator does that),
// scrapes its own /metrics and /hosts over HTTP, parses them, and exits
// non-zero unless every check of checks.go holds. Without it, it serves
// until interrupted:
//
//	go run . -dsn 'postgres://app:secret@db-a:5432,db-b:5432/app' -listen 127.0.0.1:9464
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/hosthealth"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("PGFAILOVER_DSN"), "the connection string; PGFAILOVER_DSN by default")
	listen := flag.String("listen", "", "address to serve /metrics and /hosts on (default 127.0.0.1:9464; 127.0.0.1:0 under -check)")
	drillURL := os.Getenv("PGFAILOVER_DRILL_URL")
	check := flag.Bool("check", drillURL != "", "fail over through PGFAILOVER_DRILL_URL, check /metrics and /hosts, and exit (the default when PGFAILOVER_DRILL_URL is set)")
	flag.Parse()
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "observability: set PGFAILOVER_DSN or -dsn (or run it through internal/pgtest/cmd/pgcluster)")
		os.Exit(2)
	}
	if *check && drillURL == "" {
		fmt.Fprintln(os.Stderr, "observability: -check needs PGFAILOVER_DRILL_URL, a URL a POST to which fails the primary over")
		os.Exit(2)
	}
	if *listen == "" {
		*listen = "127.0.0.1:9464"
		if *check {
			*listen = "127.0.0.1:0"
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *check {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
	}
	if err := run(ctx, *dsn, *listen, drillURL, *check); err != nil {
		fmt.Fprintln(os.Stderr, "observability:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dsn, listen, drillURL string, check bool) error {
	exporter, metrics, err := newMetrics()
	if err != nil {
		return err
	}
	// The library advises its histograms' boundaries (seconds from 5 ms
	// to a minute, attempts from 1 to 20); a view here would override them.
	mp := sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(exporter),
		sdkmetric.WithResource(resource.NewSchemaless(attribute.String("service.name", "pgfailover-observability"))))
	defer func() { _ = mp.Shutdown(context.Background()) }()

	cfg, err := failover.ParseConfig(dsn)
	if err != nil {
		return err
	}
	cfg.MeterProvider = mp
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /hosts", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(hostsOf(pool.Stat()))
	})
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	var serving sync.WaitGroup
	serving.Go(func() { _ = srv.Serve(ln) })
	defer func() {
		srv.Close()
		serving.Wait()
	}()
	base := "http://" + ln.Addr().String()
	fmt.Printf("serving %s/metrics and %s/hosts\n", base, base)

	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS observability_load (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())"); err != nil {
		return err
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	l := &load{}
	var loading sync.WaitGroup
	l.start(loadCtx, &loading, pool)
	defer func() {
		stopLoad()
		loading.Wait()
		fmt.Printf("load: %s\n", l)
	}()

	if !check {
		<-ctx.Done()
		return nil
	}
	return selfCheck(ctx, base, drillURL, pool, l)
}

// newMetrics returns the OpenTelemetry Prometheus exporter, for the
// MeterProvider, and the handler of /metrics. The exporter registers on a
// registry of the program's own, which the handler serves, with
// Prometheus-style names (pgfailover_failover_survived_total,
// pgfailover_failover_wait_seconds_bucket) whatever the default of the
// exporter's version. The tests scrape the same handler.
func newMetrics() (*otelprom.Exporter, http.Handler, error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes))
	if err != nil {
		return nil, nil, err
	}
	return exporter, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), nil
}

// hostJSON is one host as /hosts shows it: what Stat().Hosts() says of it,
// in a shape of this program's own. The address is host:port, never a
// credential.
type hostJSON struct {
	Address string `json:"address"`
	// State is the host's state for the Pool's target: healthy, unknown,
	// transient-reject, transport-error or topology-reject (the wrong role).
	State   string    `json:"state"`
	Role    string    `json:"role"`
	Claimed string    `json:"claimed_role,omitempty"`
	Zone    string    `json:"zone,omitempty"`
	Tier    string    `json:"tier"`
	Since   time.Time `json:"since"`
	Probes  int64     `json:"probes"`
	// Calls is the host's pool of the Pool's own calls, Reads the Reader's.
	Calls poolJSON `json:"calls"`
	Reads poolJSON `json:"reads"`
	// StalenessSeconds is the replica's staleness bound, absent while
	// unknown (a primary, or a replica not yet sampled).
	StalenessSeconds *float64 `json:"staleness_seconds,omitempty"`
}

// poolJSON is one pgxpool's connections.
type poolJSON struct {
	Total        int32 `json:"total"`
	Idle         int32 `json:"idle"`
	Acquired     int32 `json:"acquired"`
	Constructing int32 `json:"constructing"`
	Max          int32 `json:"max"`
	Acquires     int64 `json:"acquires"`
	NewConns     int64 `json:"new_conns"`
}

func hostsOf(s *failover.Stat) []hostJSON {
	hosts := make([]hostJSON, 0, len(s.Hosts()))
	for _, h := range s.Hosts() {
		j := hostJSON{
			Address: h.Addr,
			State:   h.State.String(),
			Role:    h.Role.String(),
			Zone:    h.Zone,
			Tier:    h.Tier.String(),
			Since:   h.Since,
			Probes:  h.Probes,
			Calls:   poolOf(h.Pool),
			Reads:   poolOf(h.Reads),
		}
		if h.Claimed != hosthealth.RoleUnknown {
			j.Claimed = h.Claimed.String() // a topology source's claim
		}
		if h.StalenessKnown {
			sec := h.Staleness.Seconds()
			j.StalenessSeconds = &sec
		}
		hosts = append(hosts, j)
	}
	return hosts
}

func poolOf(s interface {
	TotalConns() int32
	IdleConns() int32
	AcquiredConns() int32
	ConstructingConns() int32
	MaxConns() int32
	AcquireCount() int64
	NewConnsCount() int64
}) poolJSON {
	if s == nil {
		return poolJSON{}
	}
	return poolJSON{
		Total:        s.TotalConns(),
		Idle:         s.IdleConns(),
		Acquired:     s.AcquiredConns(),
		Constructing: s.ConstructingConns(),
		Max:          s.MaxConns(),
		Acquires:     s.AcquireCount(),
		NewConns:     s.NewConnsCount(),
	}
}

// load writes through the Pool and reads through its Reader, a few times
// a second each, and counts what happened.
type load struct {
	writes, writeErrors, reads, readErrors atomic.Int64
	unknown                                atomic.Int64 // writes failed with ErrCommitOutcomeUnknown
}

const loadEvery = 10 * time.Millisecond

// start runs two writers and one reader until ctx ends.
func (l *load) start(ctx context.Context, wg *sync.WaitGroup, pool *failover.Pool) {
	for range 2 {
		wg.Go(func() {
			l.loop(ctx, &l.writes, &l.writeErrors, func() error {
				_, err := pool.Exec(ctx, "INSERT INTO observability_load DEFAULT VALUES")
				return err
			})
		})
	}
	wg.Go(func() {
		var n int64
		l.loop(ctx, &l.reads, &l.readErrors, func() error {
			return pool.Reader().QueryRow(ctx, "SELECT count(*) FROM observability_load").Scan(&n)
		})
	})
}

func (l *load) loop(ctx context.Context, ok, failed *atomic.Int64, op func() error) {
	for {
		if err := op(); err == nil {
			ok.Add(1)
		} else if ctx.Err() == nil {
			failed.Add(1)
			// Expected around a failover: a write in flight when the
			// primary died may have committed there or not, and the Pool
			// does not run it again.
			if errors.Is(err, failover.ErrCommitOutcomeUnknown) {
				l.unknown.Add(1)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(loadEvery):
		}
	}
}

func (l *load) String() string {
	return fmt.Sprintf("%d writes (%d failed, %d of them with the commit outcome unknown), %d reads (%d failed)",
		l.writes.Load(), l.writeErrors.Load(), l.unknown.Load(), l.reads.Load(), l.readErrors.Load())
}

// get fetches url and returns its body.
func get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return do(req)
}

func do(req *http.Request) ([]byte, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", req.Method, req.URL, resp.Status, body)
	}
	return body, nil
}

var errCheckFailed = errors.New("self-check failed")
