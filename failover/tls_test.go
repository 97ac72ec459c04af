package failover_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/topology"
)

// TestTLSConfigSetInCode: a ConnConfig.TLSConfig replaced or edited after
// ParseConfig applies to every host, as pgxpool applies it to its one,
// hosts a topology source adds included. A strict config is never weakened
// to the string's unverified one.
func TestTLSConfigSetInCode(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, failovertest.TLS())
	primary, replica := c.Primary(), c.Replicas()[0]
	ca := c.RootCAs()

	newConfig := func(t *testing.T, dsn string) *failover.Config {
		t.Helper()
		cfg, err := failover.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	open := func(t *testing.T, ctx context.Context, cfg *failover.Config) *failover.Pool {
		t.Helper()
		pool, err := failover.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatalf("NewWithConfig: %v", err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	// onTLS checks that the Pool writes to the primary over TLS and that
	// the Reader reaches the replica over TLS.
	onTLS := func(t *testing.T, ctx context.Context, pool *failover.Pool) {
		t.Helper()
		var port int
		var ssl bool
		const q = "SELECT current_setting('port')::int, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
		if err := pool.QueryRow(ctx, q).Scan(&port, &ssl); err != nil {
			t.Fatal(err)
		}
		if port != primary.Port() || !ssl {
			t.Fatalf("Pool: port %d over TLS %v, want the primary's %d over TLS", port, ssl, primary.Port())
		}
		var lastErr error
		waitUntil(t, 30*time.Second, "a read on the replica over TLS", func() bool {
			lastErr = pool.Reader().QueryRow(ctx, q).Scan(&port, &ssl)
			return lastErr == nil && port == replica.Port() && ssl
		})
	}

	t.Run("replaced, strict, sslmode=require", func(t *testing.T) {
		ctx := testContext(t)
		cfg := newConfig(t, c.ConnString("sslmode=require&target=any"))
		cfg.ConnConfig.TLSConfig = &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "localhost"}
		pool, err := failover.NewWithConfig(ctx, cfg)
		if err == nil {
			pool.Close()
			t.Fatal("NewWithConfig connected with a TLS config that trusts no authority")
		}
		var unknownCA x509.UnknownAuthorityError
		if !errors.As(err, &unknownCA) {
			t.Fatalf("NewWithConfig: %v; want x509.UnknownAuthorityError", err)
		}
	})

	t.Run("replaced, trusting the CA, sslmode=require", func(t *testing.T) {
		ctx := testContext(t)
		cfg := newConfig(t, c.ConnString("sslmode=require"))
		cfg.ConnConfig.TLSConfig = &tls.Config{RootCAs: ca, ServerName: "localhost"}
		onTLS(t, ctx, open(t, ctx, cfg))
	})

	t.Run("edited in place, sslmode=verify-full", func(t *testing.T) {
		ctx := testContext(t)
		cfg := newConfig(t, c.ConnString("sslmode=verify-full"))
		cfg.ConnConfig.TLSConfig.RootCAs = ca
		onTLS(t, ctx, open(t, ctx, cfg))
	})

	t.Run("edited in place, verify-full, a sourced host", func(t *testing.T) {
		ctx := testContext(t)
		cfg := newConfig(t, primary.ConnString("sslmode=verify-full"))
		cfg.ConnConfig.TLSConfig.RootCAs = ca
		src := &fakeSource{updates: make(chan topology.Topology, 1)}
		src.updates <- members(hosthealth.RoleReplica, replica)
		cfg.Topology = src
		onTLS(t, ctx, open(t, ctx, cfg))
	})

	t.Run("strict, a sourced host", func(t *testing.T) {
		// Only the sourced host is in the target's role: it must be
		// refused with the strict config, not dialled with the string's
		// unverified one.
		ctx := testContext(t)
		cfg := newConfig(t, primary.ConnString("sslmode=require&target=read-only"))
		cfg.ConnConfig.TLSConfig = &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "localhost"}
		src := &fakeSource{updates: make(chan topology.Topology, 1)}
		src.updates <- members(hosthealth.RoleReplica, replica)
		cfg.Topology = src
		pool, err := failover.NewWithConfig(ctx, cfg)
		if err == nil {
			defer pool.Close()
			var ssl bool
			_ = pool.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl)
			t.Fatalf("NewWithConfig reached the sourced replica (TLS %v) with a config that trusts no authority", ssl)
		}
		if !errors.Is(err, failover.ErrNoHost) {
			t.Fatalf("NewWithConfig: %v; want ErrNoHost", err)
		}
	})
}
