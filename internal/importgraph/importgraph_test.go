package importgraph

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// unwanted are module path prefixes an importer must not find in its
// module graph: a fault proxy and what it required (a metrics client, a
// logger, an HTTP router). Tests that need such a thing use the module's
// own (internal/faultproxy) or live in a module of their own (examples/).
var unwanted = []string{
	"github.com/Shopify/toxiproxy",
	"github.com/prometheus/client_golang",
	"github.com/rs/zerolog",
	"github.com/gorilla/mux",
}

// TestImporterModuleGraph builds a module that imports every public
// package of this one through a replace directive, runs go mod tidy in it,
// and fails when go list -m all names a module of unwanted.
func TestImporterModuleGraph(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	gocmd := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		// The importer is a module of its own, outside any workspace.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr)
		}
		return string(out)
	}

	root := strings.TrimSpace(gocmd(".", "list", "-m", "-f", "{{.Dir}}"))
	module := strings.TrimSpace(gocmd(".", "list", "-m"))
	var public []string
	for _, pkg := range strings.Fields(gocmd(root, "list", "-f", "{{if ne .Name \"main\"}}{{.ImportPath}}{{end}}", "./...")) {
		if !strings.Contains(pkg, "/internal/") && !strings.Contains(pkg, "/examples/") {
			public = append(public, pkg)
		}
	}
	if len(public) == 0 {
		t.Fatalf("no public package found under %s", root)
	}

	dir := t.TempDir()
	gomod := "module example.com/importer\n\ngo 1.26\n\nrequire " + module + " v0.0.0\n\nreplace " + module + " => " + root + "\n"
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, pkg := range public {
		src.WriteString("\t_ \"" + pkg + "\"\n")
	}
	src.WriteString(")\n\nfunc main() {}\n")
	for name, text := range map[string]string{"go.mod": gomod, "main.go": src.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gocmd(dir, "mod", "tidy")
	gocmd(dir, "build", "./...")
	graph := gocmd(dir, "list", "-m", "all")
	t.Logf("an importer of %s has in its module graph:\n%s", strings.Join(public, ", "), graph)
	for _, line := range strings.Split(strings.TrimSpace(graph), "\n") {
		path := strings.Fields(line)[0]
		for _, u := range unwanted {
			if path == u || strings.HasPrefix(path, u+"/") {
				t.Errorf("an importer's module graph holds %s", line)
			}
		}
	}
}
