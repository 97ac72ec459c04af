package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestNothingLeftBehind runs alone (not parallel): once its clusters are
// closed, nothing of this process is left under the temporary directory
// or /tmp, the initdb template included (it lives in memory, and the next
// cluster copies it without running initdb again), and no process of
// theirs runs. A temporary directory too deep for a Unix socket's path
// puts the sockets under /tmp, which Close removes as well.
func TestNothingLeftBehind(t *testing.T) {
	// The servers' user must reach it: t.TempDir makes a directory of the
	// test's and one below it, both 0700.
	top := t.TempDir()
	for _, dir := range []string{top, filepath.Dir(top)} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	deep := filepath.Join(top, strings.Repeat("d", 90))
	if err := os.Mkdir(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tmp := range []string{os.TempDir(), deep} {
		t.Run(filepath.Base(tmp), func(t *testing.T) {
			t.Setenv("TMPDIR", tmp)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c, err := New(ctx, Options{Replicas: 1})
			if err != nil {
				t.Fatal(err)
			}
			if tmp == deep && !strings.HasPrefix(c.Nodes()[0].sockDir, "/tmp/") {
				t.Errorf("socket directory %s, want one under /tmp", c.Nodes()[0].sockDir)
			}
			if err := c.Primary().Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
				t.Fatal(err)
			}
			templateMu.Lock()
			made := templates[c.bins.dir]
			templateMu.Unlock()
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if dirs, pids := ourLeftovers(t); len(dirs) > 0 || len(pids) > 0 {
				t.Fatalf("after Close: directories %v, processes %v", dirs, pids)
			}
			c2, err := New(ctx, Options{})
			if err != nil {
				t.Fatal(err)
			}
			templateMu.Lock()
			again := templates[c2.bins.dir]
			templateMu.Unlock()
			if made == nil || again != made {
				t.Error("the second cluster did not copy the first one's template")
			}
			if err := c2.Close(); err != nil {
				t.Fatal(err)
			}
			if dirs, pids := ourLeftovers(t); len(dirs) > 0 || len(pids) > 0 {
				t.Fatalf("after Close: directories %v, processes %v", dirs, pids)
			}
		})
	}
}

// ourLeftovers lists the directories of this process (clusters, the
// initdb template, short socket directories, etcd's data) and processes
// working in them. Only meaningful while no other test has a cluster.
func ourLeftovers(t *testing.T) (dirs []string, pids []int) {
	t.Helper()
	var prefixes []string
	roots := []string{os.TempDir(), "/tmp"}
	if m := memDir(); m != "" {
		roots = append(roots, m) // etcd's data
	}
	for _, dir := range roots {
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			t.Fatal(err)
		}
		prefix := filepath.Join(real, fmt.Sprintf("%s%d-", dirPrefix, os.Getpid()))
		if !slices.Contains(prefixes, prefix) {
			prefixes = append(prefixes, prefix)
		}
	}
	for _, prefix := range prefixes {
		matches, _ := filepath.Glob(prefix + "*")
		dirs = append(dirs, matches...)
	}
	for _, pid := range procPIDs() {
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err == nil && slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(cwd, p) }) {
			pids = append(pids, pid)
		}
	}
	return dirs, pids
}
