package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNoBinaries is returned (wrapped) by New when the PostgreSQL server
// programs cannot be found.
var ErrNoBinaries = errors.New("pgtest: PostgreSQL server binaries not found")

// programs lists the executables the harness needs; all must be present.
var programs = []string{"postgres", "initdb"}

// Tools the harness uses when the directory has them. Without pg_basebackup
// a replica is a copy of the primary's data directory taken between
// pg_backup_start and pg_backup_stop; without pg_rewind a diverged server is
// copied from the primary afresh (see clone.go).
const (
	basebackupTool = "pg_basebackup"
	rewindTool     = "pg_rewind"
)

// binaries locates the PostgreSQL programs and knows which OS user runs them.
type binaries struct {
	dir     string
	version string // first line of `postgres --version`

	// basebackup and rewind say whether dir holds pg_basebackup and
	// pg_rewind.
	basebackup bool
	rewind     bool

	// cred is set when the test process is root: the servers then run as
	// the postgres system user, because PostgreSQL refuses to run as root.
	cred *syscall.Credential
	home string // HOME for the child processes
}

// findBinaries returns the directory holding the server programs. An explicit
// dir wins; otherwise the newest /usr/lib/postgresql/<major>/bin, then
// `pg_config --bindir`, then PATH.
func findBinaries(ctx context.Context, dir string) (*binaries, error) {
	var candidates []string
	if dir != "" {
		candidates = []string{dir}
	} else {
		candidates = append(candidates, debianBinDirs()...)
		if pc, err := exec.LookPath("pg_config"); err == nil {
			out, err := exec.CommandContext(ctx, pc, "--bindir").Output()
			if err == nil {
				candidates = append(candidates, strings.TrimSpace(string(out)))
			}
		}
		if p, err := exec.LookPath("postgres"); err == nil {
			candidates = append(candidates, filepath.Dir(p))
		}
	}
	var tried []string
	for _, d := range candidates {
		if d == "" || !hasPrograms(d) {
			tried = append(tried, d)
			continue
		}
		b := &binaries{dir: d, basebackup: isProgram(d, basebackupTool), rewind: isProgram(d, rewindTool)}
		if err := b.identify(ctx); err != nil {
			return nil, err
		}
		return b, nil
	}
	where := "searched /usr/lib/postgresql/*/bin, pg_config --bindir and PATH"
	if dir != "" {
		where = "searched " + dir
	}
	return nil, fmt.Errorf("%w (need %s; %s; tried %q)",
		ErrNoBinaries, strings.Join(programs, ", "), where, tried)
}

// cachedBinaries is findBinaries, remembered per process once successful.
// An empty dir means $PGTEST_BINDIR, and when that is unset too, the usual
// places, installing the programs there when they are missing and this
// system allows it (see EnsureServer), with a progress line on stderr.
func cachedBinaries(ctx context.Context, dir string) (*binaries, error) {
	return serverBinaries(ctx, dir, os.Stderr)
}

func serverBinaries(ctx context.Context, dir string, progress io.Writer) (*binaries, error) {
	if dir == "" {
		dir = os.Getenv(BinDirEnv)
	}
	binariesMu.Lock()
	b, ok := found[dir]
	binariesMu.Unlock()
	if ok {
		return b, nil
	}
	find := func() (*binaries, error) { return findBinaries(ctx, dir) }
	var err error
	if dir == "" {
		b, err = ensure(ctx, serverPackages, ErrNoBinaries, progress, find)
	} else if b, err = find(); errors.Is(err, ErrNoBinaries) {
		// Pointed at a directory: install nothing, say how.
		err = fmt.Errorf("%w; install with: %s", err, thisSystem().command(serverPackages))
	}
	if err != nil {
		return nil, err
	}
	binariesMu.Lock()
	found[dir] = b
	binariesMu.Unlock()
	return b, nil
}

// debianBinDirs lists /usr/lib/postgresql/<major>/bin, newest major first.
func debianBinDirs() []string {
	entries, err := os.ReadDir("/usr/lib/postgresql")
	if err != nil {
		return nil
	}
	type ver struct {
		n   int
		dir string
	}
	var vs []ver
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		vs = append(vs, ver{n, filepath.Join("/usr/lib/postgresql", e.Name(), "bin")})
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].n > vs[j].n })
	dirs := make([]string, len(vs))
	for i, v := range vs {
		dirs[i] = v.dir
	}
	return dirs
}

func hasPrograms(dir string) bool {
	for _, p := range programs {
		if !isProgram(dir, p) {
			return false
		}
	}
	return true
}

// isProgram reports whether dir holds the executable prog.
func isProgram(dir, prog string) bool {
	fi, err := os.Stat(filepath.Join(dir, prog))
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// identify records the server version and the credentials to run under.
func (b *binaries) identify(ctx context.Context) error {
	b.home = os.Getenv("HOME")
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("pgtest: running as root, PostgreSQL must run as the \"postgres\" system user: %w", err)
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("pgtest: unexpected uid/gid %q/%q for user postgres", u.Uid, u.Gid)
		}
		// The user's own supplementary groups, not root's.
		var groups []uint32
		if ids, err := u.GroupIds(); err == nil {
			for _, id := range ids {
				if g, err := strconv.ParseUint(id, 10, 32); err == nil {
					groups = append(groups, uint32(g))
				}
			}
		}
		b.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}
		b.home = u.HomeDir
		if b.home == "" {
			b.home = "/var/lib/postgresql"
		}
	}
	out, err := b.run(ctx, "/", "postgres", "--version")
	if err != nil {
		return fmt.Errorf("pgtest: %s/postgres --version: %w", b.dir, err)
	}
	b.version = strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	return nil
}

// env is the whole environment of a child process. It is built from scratch
// so that PG* variables of the test environment cannot redirect the tools.
func (b *binaries) env() []string {
	env := []string{
		"PATH=" + b.dir + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + b.home,
		"LC_ALL=C",
		"LANG=C",
	}
	if tz, ok := os.LookupEnv("TZ"); ok {
		env = append(env, "TZ="+tz)
	}
	return env
}

// command prepares one of the PostgreSQL programs. The child gets its own
// process group, so that a tool and the helpers it forks (pg_basebackup
// streams WAL from a second process) can be killed at once; server
// processes leave that group (see serverPIDs). When we are root, the child
// runs as the postgres user.
func (b *binaries) command(dir, prog string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(b.dir, prog), args...)
	cmd.Dir = dir
	cmd.Env = b.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: b.cred}
	return cmd
}

// run executes a short-lived tool to completion and returns its combined
// output. When ctx ends, the tool's whole process group is killed.
func (b *binaries) run(ctx context.Context, dir, prog string, args ...string) (string, error) {
	return runToEnd(ctx, b.command(dir, prog, args...), prog+" "+strings.Join(args, " "))
}

// runToEnd runs cmd, which must start in a process group of its own, to
// completion and returns its combined output; what names it in errors.
// When ctx ends, the whole process group is killed.
func runToEnd(ctx context.Context, cmd *exec.Cmd, what string) (string, error) {
	cmd.Stdin = nil
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start %s: %w", what, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		err = ctx.Err()
	}
	// Tools like pg_basebackup fork helpers; make sure none outlive the call.
	waitGroupGone(cmd.Process.Pid, 2*time.Second)
	if err != nil {
		return out.String(), fmt.Errorf("%s: %w\n%s", what, err, tail(out.String(), 2048))
	}
	return out.String(), nil
}

// chown hands a path to the user the servers run as (no-op unless root).
func (b *binaries) chown(path string) error {
	if b.cred == nil {
		return nil
	}
	return os.Lchown(path, int(b.cred.Uid), int(b.cred.Gid))
}

// mkdirOwned creates dir with perm, owned by the server user.
func (b *binaries) mkdirOwned(dir string, perm os.FileMode) error {
	if err := os.Mkdir(dir, perm); err != nil {
		return err
	}
	if err := os.Chmod(dir, perm); err != nil { // undo the umask
		return err
	}
	return b.chown(dir)
}

// writeOwned writes a file owned by the server user with mode 0600.
func (b *binaries) writeOwned(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return b.chown(path)
}

// tail returns at most the last n bytes of s, starting at a line boundary.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
