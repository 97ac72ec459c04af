package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pgfailover/pgfailover/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDrill: a POST to the drill endpoint promotes the replica and answers
// with its address once it is the primary.
func TestDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short; run: go test -race -run '^TestDrill$' ./internal/pgtest/cmd/pgcluster/")
	}
	c := pgtest.Start(t, pgtest.Options{Replicas: 1})
	srv := httptest.NewServer(drill(c))
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()
	resp, err := client.Post(srv.URL+"/failover", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /failover: %s: %s", resp.Status, body)
	}
	next := c.Nodes()[1]
	if got := strings.TrimSpace(string(body)); got != next.Addr() || c.Primary() != next {
		t.Fatalf("the drill answered %q; the primary is %s, want %s", got, c.Primary(), next)
	}
	resp, err = client.Get(srv.URL + "/failover")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /failover: %s, want 405", resp.Status)
	}
}

// TestRunPassesTheClusterAndTheExitStatus runs a program that checks its
// environment and exits 7: run returns 7.
func TestRunPassesTheClusterAndTheExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short; run: go test -race -run '^TestRunPassesTheClusterAndTheExitStatus$' ./internal/pgtest/cmd/pgcluster/")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, err := run(ctx, pgtest.Options{}, []string{"sh", "-c",
		`case "$PGFAILOVER_DSN" in postgres://*) ;; *) exit 1;; esac
		 case "$PGFAILOVER_DRILL_URL" in http://127.0.0.1:*/failover) exit 7;; esac
		 exit 2`})
	if err != nil || code != 7 {
		t.Fatalf("run = %d, %v; want 7 (1: no DSN, 2: no drill URL)", code, err)
	}
}
