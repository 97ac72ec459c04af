package kubernetes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgfailover/pgfailover/failover"
)

func TestTakeKeys(t *testing.T) {
	t.Setenv("PGHOST", "")
	t.Setenv("PGHOSTADDR", "")
	t.Setenv("PGSERVICE", "")
	for _, tc := range []struct {
		in, rest string
		keys     string
		host     bool
	}{
		{"postgres://app:pw@/app?kubernetes_cluster=pg&sslmode=disable", "postgres://app:pw@/app?sslmode=disable", "map[kubernetes_cluster:pg]", false},
		{"postgres://app:pw@/app?kubernetes_selector=a%3Db%2Cc&kubernetes_namespace=db", "postgres://app:pw@/app", "map[kubernetes_namespace:db kubernetes_selector:a=b,c]", false},
		{"postgresql://app:p%40ss@pg-rw.db.svc:5432/app?kubernetes_cluster=pg", "postgresql://app:p%40ss@pg-rw.db.svc:5432/app", "map[kubernetes_cluster:pg]", true},
		{"postgres://app@:5433/app?kubernetes_cluster=pg", "postgres://app@:5433/app", "map[kubernetes_cluster:pg]", false},
		{"postgres:///app?host=/tmp&kubernetes_cluster=pg", "postgres:///app?host=/tmp", "map[kubernetes_cluster:pg]", true},
		{"user=app password='a b\\'c' kubernetes_cluster = pg dbname=app", "user=app password='a b\\'c' dbname=app", "map[kubernetes_cluster:pg]", false},
		{"host=db kubernetes_selector='app=pg, role in (a,b)'", "host=db", "map[kubernetes_selector:app=pg, role in (a,b)]", true},
		{"user=app", "user=app", "map[]", false},
	} {
		rest, keys, host, err := takeKeys(tc.in)
		if err != nil || rest != tc.rest || fmt.Sprint(keys) != tc.keys || host != tc.host {
			t.Errorf("%s:\n got %q %v %v %v\nwant %q %s %v", tc.in, rest, keys, host, err, tc.rest, tc.keys, tc.host)
		}
	}
	t.Setenv("PGHOST", "db")
	if _, _, host, _ := takeKeys("postgres://app@/app"); !host {
		t.Error("PGHOST names a host")
	}
}

func TestParseConfigErrors(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "config")
	if err := os.WriteFile(kc, []byte("current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: tok-secret}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, key, msg string }{
		{"postgres://app:hunter2@/app?kubernetes_clustr=pg", "kubernetes_clustr", "unknown key"},
		{"postgres://app:hunter2@/app?kubernetes_namespace=db", "kubernetes_cluster", "Selector or Cluster is required"},
		{"postgres://app:hunter2@/app?kubernetes_cluster=pg&kubernetes_kubeconfig=" + dir + "/missing", "kubernetes_kubeconfig", "missing"},
		{"postgres://app:hunter2@/app?kubernetes_cluster=pg&kubernetes_kubeconfig=" + kc + "&kubernetes_context=y", "kubernetes_kubeconfig", `context "y" not found`},
		{"user=app password=hunter2 kubernetes_cluster='pg", "kubernetes_cluster", "unterminated"},
	} {
		_, err := ParseConfig(tc.in)
		var ce *failover.ConfigError
		if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: error %v, want key %s and %q", tc.in, err, tc.key, tc.msg)
		}
		if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "tok-secret")) {
			t.Errorf("%s: the error shows a secret: %v", tc.in, err)
		}
	}
	cfg, err := ParseConfig("postgres://app:hunter2@/app?kubernetes_cluster=pg&kubernetes_kubeconfig=" + kc + "&kubernetes_namespace=db")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Hosts) != 0 || cfg.Topology == nil {
		t.Errorf("hosts %v, topology %v: want the pods as the only hosts", cfg.Hosts, cfg.Topology)
	}
	if got, want := fmt.Sprint(cfg.Topology), `kubernetes.Source{Namespace: "db", Selector: "cnpg.io/cluster=pg,cnpg.io/instanceRole", Cluster: "pg"}`; got != want {
		t.Errorf("source %s, want %s", got, want)
	}
}
