package pgtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInstallCommand(t *testing.T) {
	for _, tc := range []struct {
		name string
		sys  system
		p    packages
		want string
	}{
		{"debian as root", system{goos: "linux", root: true, ids: []string{"debian"}}, serverPackages, "apt-get install -y postgresql"},
		{"ubuntu as a user", system{goos: "linux", ids: []string{"ubuntu", "debian"}}, serverPackages, "sudo apt-get install -y postgresql"},
		{"fedora", system{goos: "linux", ids: []string{"fedora"}}, serverPackages, "sudo dnf install -y postgresql-server"},
		{"rocky", system{goos: "linux", ids: []string{"rocky", "rhel", "centos", "fedora"}}, patroniPackages, "sudo dnf install -y patroni etcd"},
		{"macos", system{goos: "darwin"}, serverPackages, "brew install postgresql@15; then PGTEST_BINDIR=$(brew --prefix postgresql@15)/bin"},
		{"debian patroni", system{goos: "linux", ids: []string{"debian"}}, patroniPackages, "sudo apt-get install -y patroni etcd-server"},
		{"unknown", system{goos: "freebsd"}, serverPackages, "install " + serverPackages.what + " with this system's package manager"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.sys.command(tc.p); got != tc.want {
				t.Errorf("command = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCanInstall(t *testing.T) {
	deb := system{goos: "linux", root: true, ids: []string{"debian"}, aptGet: "/usr/bin/apt-get"}
	if !deb.canInstall() {
		t.Error("root on Debian with apt-get cannot install")
	}
	for _, s := range []system{
		{goos: "linux", ids: []string{"debian"}, aptGet: "/usr/bin/apt-get"},             // not root
		{goos: "linux", root: true, ids: []string{"debian"}},                             // no apt-get
		{goos: "linux", root: true, ids: []string{"fedora"}, aptGet: "/usr/bin/apt-get"}, // not Debian
		{goos: "darwin", root: true},
	} {
		if s.canInstall() {
			t.Errorf("%+v can install", s)
		}
	}
}

func TestOSReleaseIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "os-release")
	os.WriteFile(path, []byte("NAME=\"Ubuntu\"\nID=ubuntu\nID_LIKE=\"debian\"\nVERSION_ID=\"24.04\"\n"), 0o644)
	if got := strings.Join(osReleaseIDs(path), ","); got != "ubuntu,debian" {
		t.Errorf("ids = %q", got)
	}
	if ids := osReleaseIDs(filepath.Join(t.TempDir(), "missing")); ids != nil {
		t.Errorf("ids of a missing file = %q", ids)
	}
}

// TestBinDirEnv: a $PGTEST_BINDIR without the programs is looked at alone,
// installs nothing, and the error says how to install them here.
func TestBinDirEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(BinDirEnv, dir)
	_, err := EnsureServer(context.Background(), os.Stderr)
	if !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("EnsureServer with an empty %s: %v", BinDirEnv, err)
	}
	want := "install with: " + thisSystem().command(serverPackages)
	if !strings.Contains(err.Error(), dir) || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("error %q does not name %s and end with %q", err, dir, want)
	}
}

// TestInstallEnv: $PGTEST_INSTALL=0 keeps ensure from installing, on any
// system: the programs are looked for once, and the error wraps the
// missing one's, says why nothing was installed and ends with the command
// that installs them. A value that is neither a yes nor a no counts as 0.
func TestInstallEnv(t *testing.T) {
	missing := errors.New("no such program")
	for _, tc := range []struct{ value, why string }{
		{"0", "PGTEST_INSTALL=0 turns installing off"},
		{"off", "PGTEST_INSTALL=off turns installing off"},
		{"maybe", `PGTEST_INSTALL="maybe" is not a yes or a no, so it is taken as 0`},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Setenv(InstallEnv, tc.value)
			looks := 0
			_, err := ensure(context.Background(), serverPackages, missing, io.Discard, func() (int, error) {
				looks++
				return 0, fmt.Errorf("postgres: %w", missing)
			})
			if !errors.Is(err, missing) || looks != 1 {
				t.Fatalf("ensure looked %d times and returned %v; want one look and the missing error", looks, err)
			}
			want := tc.why + "; install with: " + thisSystem().command(serverPackages)
			if !strings.HasSuffix(err.Error(), want) {
				t.Errorf("error %q does not end with %q", err, want)
			}
		})
	}
	for _, v := range []string{"", "1", "true", "YES", "on"} {
		t.Setenv(InstallEnv, v)
		if off, why := installOff(); off {
			t.Errorf("%s=%q turns installing off (%s)", InstallEnv, v, why)
		}
	}
}
