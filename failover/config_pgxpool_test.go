package failover

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ParseConfig and NewWithConfig have pgxpool's signatures, with this
// package's types.
var (
	_ func(string) (*Config, error)                                 = ParseConfig
	_ func(context.Context, *Config) (*Pool, error)                 = NewWithConfig
	_ func(string) (*pgxpool.Config, error)                         = pgxpool.ParseConfig
	_ func(context.Context, *pgxpool.Config) (*pgxpool.Pool, error) = pgxpool.NewWithConfig
)

// nopTracer is a pgx.QueryTracer that does nothing.
type nopTracer struct{}

func (nopTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (nopTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Code written for a *pgxpool.Config compiles against a *Config, and what
// it sets reaches every host's pool config, each on its own.
func TestConfigPgxpoolShape(t *testing.T) {
	clearPGEnv(t)
	cfg, err := ParseConfig("postgres://app:" + testPassword + "@db-a:5432,db-b:5433,db-c:5434/appdb?pool_max_conns=10&sslmode=prefer")
	if err != nil {
		t.Fatal(err)
	}

	// pgxpool-style code, unchanged but for the package of ParseConfig.
	var called struct{ beforeConnect, afterConnect, prepareConn, afterRelease, beforeClose int }
	tracer := &nopTracer{}
	cfg.MaxConns = 4
	cfg.MinConns = 1
	cfg.MaxConnLifetime = 7 * time.Minute
	cfg.HealthCheckPeriod = 11 * time.Second
	cfg.ConnConfig.Tracer = tracer
	cfg.BeforeConnect = func(context.Context, *pgx.ConnConfig) error { called.beforeConnect++; return nil }
	cfg.AfterConnect = func(context.Context, *pgx.Conn) error { called.afterConnect++; return nil }
	cfg.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) { called.prepareConn++; return true, nil }
	cfg.AfterRelease = func(*pgx.Conn) bool { called.afterRelease++; return true }
	cfg.BeforeClose = func(*pgx.Conn) { called.beforeClose++ }

	if len(cfg.Hosts) != 3 {
		t.Fatalf("hosts = %q", addrs(cfg.Hosts))
	}
	for i := range cfg.Hosts {
		pc := cfg.poolConfig(cfg.Hosts[i])
		if pc.MaxConns != 4 || pc.MinConns != 1 || pc.MaxConnLifetime != 7*time.Minute || pc.HealthCheckPeriod != 11*time.Second {
			t.Errorf("host %d: MaxConns=%d MinConns=%d MaxConnLifetime=%v HealthCheckPeriod=%v; want 4, 1, 7m, 11s each",
				i, pc.MaxConns, pc.MinConns, pc.MaxConnLifetime, pc.HealthCheckPeriod)
		}
		if pc.ConnConfig.Tracer != tracer {
			t.Errorf("host %d: ConnConfig.Tracer = %v, want the one set", i, pc.ConnConfig.Tracer)
		}
		if pc.ConnConfig.Host != cfg.Hosts[i].Host || pc.ConnConfig.Port != cfg.Hosts[i].Port {
			t.Errorf("host %d: dials %s:%d, want %s", i, pc.ConnConfig.Host, pc.ConnConfig.Port, cfg.Hosts[i].Addr())
		}
		before := called
		if pc.BeforeConnect == nil || pc.AfterConnect == nil || pc.PrepareConn == nil || pc.AfterRelease == nil || pc.BeforeClose == nil {
			t.Fatalf("host %d: a hook did not reach the host's pool config", i)
		}
		_ = pc.BeforeConnect(context.Background(), pc.ConnConfig)
		_ = pc.AfterConnect(context.Background(), nil)
		_, _ = pc.PrepareConn(context.Background(), nil)
		_ = pc.AfterRelease(nil)
		pc.BeforeClose(nil)
		if called.beforeConnect != before.beforeConnect+1 || called.afterConnect != before.afterConnect+1 ||
			called.prepareConn != before.prepareConn+1 || called.afterRelease != before.afterRelease+1 ||
			called.beforeClose != before.beforeClose+1 {
			t.Errorf("host %d: hooks called %+v, before %+v; want each once more", i, called, before)
		}
	}

	// A Copy carries the settings too and is its own.
	cp := cfg.Copy()
	cp.MaxConns = 99
	cp.ConnConfig.Tracer = nil
	if cfg.MaxConns != 4 || cfg.ConnConfig.Tracer != tracer {
		t.Errorf("changing the Copy changed the original: MaxConns=%d Tracer=%v", cfg.MaxConns, cfg.ConnConfig.Tracer)
	}
	if got := cp.poolConfig(cp.Hosts[2]).MaxConns; got != 99 {
		t.Errorf("Copy's host pool MaxConns = %d, want 99", got)
	}

	// The embedded pgxpool.Config is reachable by its type's name, for code
	// that wants pgx's own view of the string.
	var _ *pgxpool.Config = cfg.Config
}
