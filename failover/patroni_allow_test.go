package failover_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// TestPatroniAllowList: members outside patroni_allowed_hosts are never
// dialled, nor listed; without the list they would be.
func TestPatroniAllowList(t *testing.T) {
	skipUnderShort(t)
	c := failovertest.Start(t, failovertest.Replicas(0))
	ctx := testContext(t)
	p := c.Primary()
	cluster := fmt.Sprintf(`{"members": [
		{"name": "a", "role": "leader", "state": "running", "host": "127.0.0.1", "port": %d},
		{"name": "b", "role": "replica", "state": "running", "host": "10.255.0.1", "port": 5432},
		{"name": "c", "role": "sync_standby", "state": "streaming", "host": "db.elsewhere.example", "port": 5432}
	]}`, p.Port())
	apiURL := servePatroniCluster(t, cluster)

	for _, tc := range []struct {
		name, allow string
		outside     bool // the other two members may be dialled
	}{
		{"allowed", "&patroni_allowed_hosts=127.0.0.0/8,*.db.internal", false},
		{"no list", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := failover.ParseConfig(p.ConnString("patroni_api_urls=" + apiURL + tc.allow))
			if err != nil {
				t.Fatal(err)
			}
			// Every host looked up or dialled, by name or address.
			var mu sync.Mutex
			dialled := map[string]int{}
			touch := func(host string) {
				mu.Lock()
				defer mu.Unlock()
				dialled[host]++
			}
			lookup := cfg.ConnConfig.LookupFunc
			cfg.ConnConfig.LookupFunc = func(ctx context.Context, host string) ([]string, error) {
				touch(host)
				if host != "127.0.0.1" {
					return nil, errors.New("no such host (test)")
				}
				return lookup(ctx, host)
			}
			next := cfg.ConnConfig.DialFunc
			cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
				host, _, _ := net.SplitHostPort(addr)
				touch(host)
				return next(ctx, network, addr)
			}
			pool, err := failover.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
				t.Fatal(err)
			}
			var one int
			if err := pool.Reader().QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
				t.Fatal(err)
			}
			if tc.outside {
				waitUntil(t, 10*time.Second, "the members outside dialled", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return dialled["10.255.0.1"] > 0 && dialled["db.elsewhere.example"] > 0
				})
				return
			}
			hosts := pool.Stat().Hosts()
			if len(hosts) != 1 || hosts[0].Addr != p.Addr() {
				t.Fatalf("hosts %v, want only %s", hosts, p.Addr())
			}
			mu.Lock()
			defer mu.Unlock()
			for host, n := range dialled {
				if host != "127.0.0.1" {
					t.Errorf("%s, outside the allow-list, was looked up or dialled %d times", host, n)
				}
			}
		})
	}
}

// servePatroniCluster serves cluster, a Patroni /cluster answer, on every
// path of a local HTTP server, and returns the server's URL.
func servePatroniCluster(t *testing.T, cluster string) string {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, cluster)
	}))
	t.Cleanup(api.Close)
	return api.URL
}
