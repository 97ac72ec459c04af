package kubeapi_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/kubernetes/internal/kubeapi"
	"github.com/pgfailover/pgfailover/kubernetes/kubetest"
)

// In-cluster credentials against a real API server: the service
// account's CA verifies the server, its token is the SourceUser's, and a
// token file that changes is read again for the next request.
func TestInClusterAgainstAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := kubetest.StartAPIServer(t)
	if err := a.CreateNamespace(ctx, "db"); err != nil {
		t.Fatal(err)
	}
	dir, env, err := a.ServiceAccountDir("db")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := kubeapi.InCluster(dir, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubeapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	path := "/api/v1/namespaces/" + cfg.Namespace + "/pods"
	if _, err := c.List(ctx, path, nil); err != nil {
		t.Fatalf("list as the service account: %v", err)
	}
	// Outside its Role: refused, and the error names the path.
	if _, err := c.List(ctx, "/api/v1/namespaces/db/secrets", nil); err == nil || !strings.Contains(err.Error(), "secrets: 403") {
		t.Errorf("secrets: %v, want 403", err)
	}
	good, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("rotated-but-wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(ctx, path, nil); err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "rotated-but-wrong") {
		t.Errorf("with a wrong token: %v, want 401 without the token", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), good, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(ctx, path, nil); err != nil {
		t.Errorf("with the token back: %v", err)
	}
}
