package failovertest_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// outcome is what Start or StartPatroni did to a test: skipped it, failed
// it, or neither.
type outcome struct {
	testing.TB
	skipped, failed string
}

func (o *outcome) Helper() {}

func (o *outcome) Skip(args ...any) { o.skipped = fmt.Sprint(args...); runtime.Goexit() }

func (o *outcome) Skipf(format string, args ...any) {
	o.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (o *outcome) Fatal(args ...any) { o.failed = fmt.Sprint(args...); runtime.Goexit() }

func (o *outcome) Fatalf(format string, args ...any) {
	o.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// startIn runs start on a goroutine of its own, as the testing package runs
// a test, and returns what it did to the test.
func startIn(t *testing.T, start func(testing.TB)) *outcome {
	o := &outcome{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		start(o)
	}()
	<-done
	return o
}

// TestSkipUnavailable: when the server programs cannot be had, Start and
// StartPatroni fail the test, unless SkipUnavailable or
// $PGTEST_SKIP_UNAVAILABLE says to skip it, with the reason; any other
// failure to start fails the test either way, and so does a value of the
// variable that is no yes or no.
func TestSkipUnavailable(t *testing.T) {
	// No PostgreSQL programs where the harness looks, and nothing installed.
	t.Setenv(failovertest.BinDirEnv, t.TempDir())
	t.Setenv(failovertest.InstallEnv, "0")
	start := func(opts ...failovertest.Option) func(testing.TB) {
		return func(tb testing.TB) { failovertest.Start(tb, opts...) }
	}
	startPatroni := func(opts ...failovertest.Option) func(testing.TB) {
		return func(tb testing.TB) { failovertest.StartPatroni(tb, opts...) }
	}
	for _, tc := range []struct {
		name  string
		env   string
		start func(testing.TB)
		skip  bool   // else the test fails
		say   string // in the reason
	}{
		{"fails by default", "", start(), false, "server binaries not found"},
		{"option", "", start(failovertest.SkipUnavailable()), true, "install with: "},
		{"environment", "1", start(), true, "install with: "},
		{"environment says no", "0", start(), false, "server binaries not found"},
		{"environment is no yes or no", "maybe", start(), false, `PGTEST_SKIP_UNAVAILABLE="maybe" is not a yes`},
		{"another failure", "1", start(failovertest.SkipUnavailable(), failovertest.Replicas(-1)), false, "Replicas = -1"},
		{"patroni fails by default", "", startPatroni(), false, "not found"},
		{"patroni option", "", startPatroni(failovertest.SkipUnavailable()), true, "install with: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(failovertest.SkipUnavailableEnv, tc.env)
			o := startIn(t, tc.start)
			got, other := o.failed, o.skipped
			if tc.skip {
				got, other = o.skipped, o.failed
			}
			if !strings.Contains(got, tc.say) || other != "" {
				t.Errorf("skipped with %q, failed with %q; want it %s, saying %q",
					o.skipped, o.failed, map[bool]string{true: "skipped", false: "failed"}[tc.skip], tc.say)
			}
		})
	}
	// Patroni's programs missing: PATH holds none of them.
	t.Setenv(failovertest.BinDirEnv, "")
	t.Setenv("PATH", t.TempDir())
	t.Setenv(failovertest.SkipUnavailableEnv, "")
	o := startIn(t, startPatroni(failovertest.SkipUnavailable()))
	if !strings.Contains(o.skipped, "Patroni or etcd not found") || o.failed != "" {
		t.Errorf("without Patroni: skipped with %q, failed with %q; want it skipped", o.skipped, o.failed)
	}
}

// TestProjectNeverSkips: the project's own tests fail when their servers
// are missing; none but this file's asks to be skipped instead.
func TestProjectNeverSkips(t *testing.T) {
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "vendor" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || filepath.Base(path) == "skip_test.go" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(src), "failovertest.SkipUnavailable()") {
			t.Errorf("%s asks to skip when servers are missing; the project's tests must fail instead", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
