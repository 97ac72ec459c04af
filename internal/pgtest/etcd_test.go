package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEtcdWritable: the wait before every Patroni start passes while etcd
// grants leases, holds while etcd grants none (stopped here, as a stalled
// disk or a starved process holds it) until its deadline, and passes again
// once etcd answers. etcd's data lives in memory where there is a memory
// file system, and stop removes it.
func TestEtcdWritable(t *testing.T) {
	skipUnderShort(t)
	ctx := testCtx(t)
	progs, err := EnsurePatroni(ctx, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &etcd{bin: progs["etcd"], dir: filepath.Join(dir, "etcd"), logPath: filepath.Join(dir, "etcd", "etcd.log")}
	for _, p := range []*int{&e.clientPort, &e.peerPort} {
		if *p, err = reservePort(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { releasePort(*p) })
	}
	if err := e.newMemData(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.stop() })
	if m := memDir(); m != "" && !strings.HasPrefix(e.dataDir(), m+"/") {
		t.Errorf("etcd's data in %s, want it under %s", e.dataDir(), m)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if err := e.start(ctx, hc, "pgtest-etcd-writable"); err != nil {
		t.Fatal(err)
	}
	if err := e.waitWritable(ctx, hc, time.Second); err != nil {
		t.Fatal(err)
	}

	if err := syscall.Kill(e.proc.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if !pollUntil(10*time.Second, func() bool { return procStopped(e.proc.pid) }) {
		t.Fatal("etcd did not stop")
	}
	sctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	err = e.waitWritable(sctx, hc, 200*time.Millisecond)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waitWritable with etcd stopped: %v, want the deadline", err)
	}
	if err := syscall.Kill(e.proc.pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := e.waitWritable(ctx, hc, time.Second); err != nil {
		t.Fatalf("waitWritable once etcd runs again: %v", err)
	}

	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	if e.memData != "" {
		if _, err := os.Stat(e.memData); !os.IsNotExist(err) {
			t.Errorf("etcd's data left in %s: %v", e.memData, err)
		}
	}
}

// TestSweepMemData: etcd's data that a process left on the memory file
// system when it died without Close goes with the next sweep; that of a
// live process stays.
func TestSweepMemData(t *testing.T) {
	m := memDir()
	if m == "" {
		return // etcd keeps its data in the cluster directory
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	left, err := os.MkdirTemp(m, fmt.Sprintf("%s%d-etcd-", dirPrefix, dead.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(left) })
	ours, err := os.MkdirTemp(m, fmt.Sprintf("%s%d-etcd-", dirPrefix, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(ours) })
	for _, d := range []string{left, ours} {
		if err := os.MkdirAll(filepath.Join(d, "data", "member", "wal"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if pidAlive(dead.Process.Pid) {
		return // the pid was taken again meanwhile: nothing to check
	}
	sweepStaleIn(m)
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("%s of a dead process not swept: %v", left, err)
	}
	if _, err := os.Stat(ours); err != nil {
		t.Errorf("%s of this process swept: %v", ours, err)
	}
}
