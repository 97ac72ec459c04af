package hosthealth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestAuthRefused(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "28P01"}, true},
		{&pgconn.PgError{Code: "28000"}, true},
		{fmt.Errorf("connect: %w", &pgconn.PgError{Code: "28P01"}), true},
		{&pgconn.PgError{Code: "3D000"}, false}, // Terminal, but not the credentials
		{&pgconn.PgError{Code: "57P03"}, false},
		{syscall.ECONNREFUSED, false},
		{nil, false},
	} {
		if got := AuthRefused(tc.err); got != tc.want {
			t.Errorf("AuthRefused(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestUnanswered(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"deadline", context.DeadlineExceeded, true},
		{"connect failed", &pgconn.ConnectError{}, true},
		{"end of file", io.EOF, false},                      // the server closed it
		{"shutdown", &pgconn.PgError{Code: "57P01"}, false}, // the server spoke
		{"auth", &pgconn.PgError{Code: "28P01"}, false},     // Terminal
		{"not failover", errors.New("syntax"), false},       //
		{"refused bare", syscall.ECONNREFUSED, false},       // not a connect error: a wrapper's
		{"canceled", context.Canceled, false},               // the caller's
		{"nil", nil, false},                                 //
	} {
		if got := Unanswered(tc.err); got != tc.want {
			t.Errorf("%s: Unanswered(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestFencedBy(t *testing.T) {
	for _, s := range []string{"configuration file", "command line", "environment variable", "override"} {
		if !FencedBy(s) {
			t.Errorf("FencedBy(%q) = false", s)
		}
	}
	for _, s := range []string{"user", "database", "session", "default", ""} {
		if FencedBy(s) {
			t.Errorf("FencedBy(%q) = true", s)
		}
	}
	want := "('configuration file', 'command line', 'environment variable', 'override')"
	if got := FencingSourcesSQL(); got != want {
		t.Errorf("FencingSourcesSQL() = %s, want %s", got, want)
	}
}
