package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/pgfailover/pgfailover/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunWithoutPrograms: pointed at a directory without the programs, run
// installs nothing and says how to install them.
func TestRunWithoutPrograms(t *testing.T) {
	t.Setenv(pgtest.BinDirEnv, t.TempDir())
	err := run(context.Background(), false)
	if !errors.Is(err, pgtest.ErrNoBinaries) || !strings.Contains(err.Error(), "install with: ") {
		t.Fatalf("run = %v, want ErrNoBinaries with the install command", err)
	}
}

// TestRun finds (or, on a fresh Debian machine as root, installs) the
// PostgreSQL programs.
func TestRun(t *testing.T) {
	if err := run(context.Background(), false); err != nil {
		t.Fatal(err)
	}
}
