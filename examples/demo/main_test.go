package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// asProgram, when set in the environment, makes the test binary run the
// demo's main instead of the tests, so that a test can watch the program
// as a user would: its output and its exit status.
const asProgram = "PGFAILOVER_DEMO_AS_PROGRAM"

func TestMain(m *testing.M) {
	if os.Getenv(asProgram) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestDemo runs the whole demonstration: it fails when writes do not resume
// on the promoted replica, or when an acknowledged write is lost or
// duplicated.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short; run: go test -race -run '^TestDemo$' ./examples/demo/")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDemoWithoutPostgreSQL runs the demo where the PostgreSQL programs
// cannot be found ($PGTEST_BINDIR names an empty directory, which also
// rules out installing them): it must exit with status 1 and say what is
// missing and the command that installs it, without a stack trace.
func TestDemoWithoutPostgreSQL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), asProgram+"=1", failovertest.BinDirEnv+"="+empty)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("the demo ended with %v, want exit status 1; output:\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{"PostgreSQL server binaries not found", empty, "install with: "} {
		if !strings.Contains(text, want) {
			t.Errorf("the output does not say %q:\n%s", want, text)
		}
	}
	for _, trace := range []string{"panic:", "goroutine ", ".go:"} {
		if strings.Contains(text, trace) {
			t.Errorf("the output holds a stack trace (%q):\n%s", trace, text)
		}
	}
	t.Logf("the demo said: %s", strings.TrimSpace(text))
}
