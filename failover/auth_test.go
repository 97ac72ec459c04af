package failover_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// TestWrongPasswordTriesOneHost: credentials hold for the whole cluster,
// so with a wrong password New reports the authentication failure from the
// first host, as pgx does, and sends the password to no other host.
func TestWrongPasswordTriesOneHost(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := pgtest.Start(t, pgtest.Options{Replicas: 2})
	dsn := strings.Replace(c.ConnString(""), ":"+c.Password()+"@", ":not-the-password@", 1)
	if dsn == c.ConnString("") {
		t.Fatal("could not replace the password in the connection string")
	}
	_, err := failover.New(ctx, dsn)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
		t.Fatalf("New with a wrong password: want 28P01, got %v", err)
	}
	if errors.Is(err, failover.ErrNoHost) {
		t.Errorf("a wrong password is reported as ErrNoHost: %v", err)
	}
	var he *failover.HostError
	if !errors.As(err, &he) || he.Addr != c.Nodes()[0].Addr() {
		t.Errorf("want the first host named, got %v", err)
	}
	if strings.Contains(err.Error(), "not-the-password") {
		t.Errorf("the password is in the error: %v", err)
	}
	for i, n := range c.Nodes() {
		log, err := os.ReadFile(n.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		failed := strings.Count(string(log), "password authentication failed")
		if want := map[bool]int{true: 1, false: 0}[i == 0]; failed != want {
			t.Errorf("%s logged %d failed authentications, want %d", n, failed, want)
		}
	}
}

// TestWrongPasswordPassesOverADownHost: a host that cannot be reached
// settles nothing, so the next one is asked, and its refusal ends New
// before the last host sees the password.
func TestWrongPasswordPassesOverADownHost(t *testing.T) {
	skipUnderShort(t)
	ctx := testContext(t)
	c := pgtest.Start(t, pgtest.Options{Replicas: 2})
	nodes := c.Nodes()
	if err := nodes[0].Stop(ctx, pgtest.Fast); err != nil {
		t.Fatal(err)
	}
	dsn := strings.Replace(c.ConnString(""), ":"+c.Password()+"@", ":not-the-password@", 1)
	_, err := failover.New(ctx, dsn)
	var he *failover.HostError
	var pgErr *pgconn.PgError
	if !errors.As(err, &he) || he.Addr != nodes[1].Addr() || !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
		t.Fatalf("want the 28P01 of %s, got %v", nodes[1].Addr(), err)
	}
	log, err := os.ReadFile(nodes[2].LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "password authentication failed"); n != 0 {
		t.Errorf("%s logged %d failed authentications, want 0", nodes[2], n)
	}
}
