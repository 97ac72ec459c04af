package pgtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BinDirEnv names the environment variable that points pgtest at the
// directory of the PostgreSQL server programs, as Options.BinDir does
// (which wins over it). When it is set, pgtest looks there only and
// installs nothing.
const BinDirEnv = "PGTEST_BINDIR"

// InstallEnv names the environment variable that keeps pgtest from
// installing anything: with PGTEST_INSTALL=0 (or false, no, off) a missing
// program is an error wrapping ErrNoBinaries or ErrNoPatroni that ends
// with the command that installs it, as on a system where pgtest cannot
// install. Unset, empty, 1, true, yes or on leave installing as it is; any
// other value is taken as 0.
const InstallEnv = "PGTEST_INSTALL"

// installOff reports whether $PGTEST_INSTALL turns installing off, and
// says why for the error.
func installOff() (bool, string) {
	v := os.Getenv(InstallEnv)
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "1", "true", "yes", "on":
		return false, ""
	case "0", "false", "no", "off":
		return true, InstallEnv + "=" + v + " turns installing off"
	}
	return true, fmt.Sprintf("%s=%q is not a yes or a no, so it is taken as 0", InstallEnv, v)
}

// packages is one set of programs pgtest can install, and how, on each
// kind of system.
type packages struct {
	what  string   // what they are, for messages
	apt   []string // Debian, Ubuntu
	dnf   []string // Fedora, RHEL and their kin
	brew  string   // macOS; "" when Homebrew has no formula
	about string   // how long apt-get takes here, for the progress line
	hint  string   // after a Homebrew install, what else to do
}

var (
	serverPackages = packages{
		what:  "the PostgreSQL server programs (postgres, initdb, pg_basebackup, pg_rewind)",
		apt:   []string{"postgresql"},
		dnf:   []string{"postgresql-server"},
		brew:  "postgresql@15",
		about: "30 s",
		hint:  "; then " + BinDirEnv + "=$(brew --prefix postgresql@15)/bin",
	}
	patroniPackages = packages{
		what:  "Patroni and etcd (patroni, patronictl, etcd)",
		apt:   []string{"patroni", "etcd-server"},
		dnf:   []string{"patroni", "etcd"},
		about: "15 s",
	}
)

// system is what decides how packages get installed on this machine.
type system struct {
	goos   string
	root   bool
	ids    []string // ID and ID_LIKE of /etc/os-release
	aptGet string   // path of apt-get, "" when absent
}

func thisSystem() system {
	s := system{goos: runtime.GOOS, root: os.Geteuid() == 0}
	s.ids = osReleaseIDs("/etc/os-release")
	s.aptGet, _ = exec.LookPath("apt-get")
	return s
}

// osReleaseIDs returns the words of ID and ID_LIKE in an os-release file.
func osReleaseIDs(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && (k == "ID" || k == "ID_LIKE") {
			ids = append(ids, strings.Fields(strings.Trim(v, `"'`))...)
		}
	}
	return ids
}

func (s system) is(id string) bool {
	for _, v := range s.ids {
		if v == id {
			return true
		}
	}
	return false
}

// canInstall reports whether pgtest installs packages itself here: as root
// on Debian or Ubuntu, through apt-get.
func (s system) canInstall() bool {
	return s.goos == "linux" && s.root && s.aptGet != "" && (s.is("debian") || s.is("ubuntu"))
}

// command is the exact command that installs p on this system, for the
// user to run.
func (s system) command(p packages) string {
	sudo := "sudo "
	if s.root {
		sudo = ""
	}
	switch {
	case s.goos == "darwin" && p.brew != "":
		return "brew install " + p.brew + p.hint
	case s.goos == "linux" && (s.is("debian") || s.is("ubuntu")):
		return sudo + "apt-get install -y " + strings.Join(p.apt, " ")
	case s.goos == "linux" && (s.is("fedora") || s.is("rhel") || s.is("centos")):
		return sudo + "dnf install -y " + strings.Join(p.dnf, " ")
	}
	return "install " + p.what + " with this system's package manager"
}

// installMu makes the installs of one process take turns; installLock does
// the same across processes (test binaries run side by side).
var installMu sync.Mutex

// ensure runs have, and when it fails with missing (the programs are not
// there) installs p if this system allows it and runs have again.
// progress gets one line before the install starts. Without an install,
// have's error is returned with the command that installs p.
func ensure[T any](ctx context.Context, p packages, missing error, progress io.Writer, have func() (T, error)) (T, error) {
	v, err := have()
	if err == nil || !errors.Is(err, missing) {
		return v, err
	}
	sys := thisSystem()
	if off, why := installOff(); off {
		return v, fmt.Errorf("%w; %s; install with: %s", err, why, sys.command(p))
	}
	if !sys.canInstall() {
		return v, fmt.Errorf("%w; install with: %s", err, sys.command(p))
	}
	installMu.Lock()
	defer installMu.Unlock()
	unlock, lerr := installLock()
	if lerr != nil {
		return v, fmt.Errorf("%w; installing: %v", err, lerr)
	}
	defer unlock()
	if v, err = have(); err == nil { // another process installed them meanwhile
		return v, nil
	}
	if ierr := aptInstall(ctx, sys, p, progress); ierr != nil {
		return v, fmt.Errorf("%w; installing with apt-get: %v", err, ierr)
	}
	return have()
}

// installLock takes an exclusive lock on a file in the temporary directory,
// waiting for any other process installing.
func installLock() (func(), error) {
	return LockFile(filepath.Join(os.TempDir(), "pgtest-install.lock"))
}

// LockFile takes an exclusive lock on the file at path, creating it, and
// waits while another process holds it. The returned function releases it.
func LockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// aptTimeout bounds one install. The caller's deadline does not: killing
// apt-get halfway leaves dpkg interrupted, to be repaired by hand, and the
// next caller would only start the install again.
const aptTimeout = 10 * time.Minute

// aptInstall installs p with apt-get, keeping the packages from starting
// their services (a default PostgreSQL cluster, etcd, Patroni): the tests
// run their own, on their own ports.
func aptInstall(ctx context.Context, sys system, p packages, progress io.Writer) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), aptTimeout)
	defer cancel()
	const policy = "/usr/sbin/policy-rc.d"
	if _, err := os.Stat(policy); os.IsNotExist(err) {
		if err := os.WriteFile(policy, []byte("#!/bin/sh\nexit 101\n"), 0o755); err != nil {
			return err
		}
		defer os.Remove(policy)
	}
	if _, err := aptGet(ctx, sys, "update"); err != nil {
		return err
	}
	fmt.Fprintf(progress, "pgtest: installing %s (about %s)…\n", strings.Join(resolve(ctx, p.apt), " "), p.about)
	_, err := aptGet(ctx, sys, append([]string{"install", "-y"}, p.apt...)...)
	return err
}

// resolve names the versioned packages a metapackage stands for
// (postgresql is postgresql-15 on Debian bookworm), for the progress line.
func resolve(ctx context.Context, names []string) []string {
	var out []string
	for _, n := range names {
		b, err := exec.CommandContext(ctx, "apt-cache", "depends", n).Output()
		dep := ""
		if err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if d, ok := strings.CutPrefix(strings.TrimSpace(line), "Depends: "); ok && strings.HasPrefix(d, n+"-") {
					dep = d
					break
				}
			}
		}
		if dep == "" {
			dep = n
		}
		out = append(out, dep)
	}
	return out
}

func aptGet(ctx context.Context, sys system, args ...string) (string, error) {
	cmd := exec.Command(sys.aptGet, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return runToEnd(ctx, cmd, "apt-get "+strings.Join(args, " "))
}

// EnsureServer returns the directory of the PostgreSQL server programs
// ($PGTEST_BINDIR, or the places New looks in), installing them first when
// they are missing and this is a Debian or Ubuntu machine where the
// process runs as root, unless $PGTEST_INSTALL is 0 (InstallEnv), with a
// progress line on progress. Otherwise a
// missing program is an error wrapping ErrNoBinaries that ends with the
// command that installs them on this system (apt-get, dnf, brew). New and
// Start do the same; programs call it to install ahead of time.
func EnsureServer(ctx context.Context, progress io.Writer) (string, error) {
	b, err := serverBinaries(ctx, "", progress)
	if err != nil {
		return "", err
	}
	return b.dir, nil
}

// EnsurePatroni is EnsureServer for the programs a Patroni cluster needs
// besides PostgreSQL: patroni, patronictl and etcd, in PATH. It returns
// their paths by name.
func EnsurePatroni(ctx context.Context, progress io.Writer) (map[string]string, error) {
	return ensure(ctx, patroniPackages, ErrNoPatroni, progress, lookPatroni)
}
