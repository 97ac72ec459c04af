package pgtest

import (
	"fmt"
	"syscall"
	"time"
)

// Freeze stops every process of the running server with SIGSTOP, as a
// machine that hangs does: connections stay open and new ones are accepted
// by the kernel, but nothing answers; standbys of a frozen primary stop
// receiving WAL. Thaw resumes it. The postmaster is stopped first, so it
// forks nothing new, then every process working in the data directory.
// Stopping a frozen server (Stop, Close) thaws it first. Freeze needs
// /proc (Linux) to find the server's processes.
func (n *Node) Freeze() error {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	if p == nil || p.exited() {
		return fmt.Errorf("%w: cannot freeze %s", ErrStopped, n.name)
	}
	if !canFreeze() {
		return fmt.Errorf("pgtest: %s: freezing a server needs /proc", n.name)
	}
	n.frozen.Store(true)
	if err := syscall.Kill(p.pid, syscall.SIGSTOP); err != nil {
		return n.errorf("freeze: SIGSTOP to postmaster %d: %w", p.pid, err)
	}
	// A fork under way when the signal came completes before the postmaster
	// stops; once it has stopped, the list of its processes is final.
	if !pollUntil(10*time.Second, func() bool { return procStopped(p.pid) }) {
		return n.errorf("freeze: postmaster %d did not stop", p.pid)
	}
	running := func() bool {
		left := false
		for _, pid := range serverPIDs(n.dataDir) {
			if !procStopped(pid) {
				_ = syscall.Kill(pid, syscall.SIGSTOP)
				left = true
			}
		}
		return !left
	}
	if !pollUntil(10*time.Second, running) {
		return n.errorf("freeze: server processes did not stop")
	}
	return nil
}

// Thaw resumes a server frozen by Freeze with SIGCONT, its other processes
// before the postmaster. Thawing a server that is not frozen does nothing.
func (n *Node) Thaw() error {
	if !n.frozen.Swap(false) {
		return nil
	}
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	for _, pid := range serverPIDs(n.dataDir) {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	if p != nil && !p.exited() {
		if err := syscall.Kill(p.pid, syscall.SIGCONT); err != nil {
			return n.errorf("thaw: SIGCONT to postmaster %d: %w", p.pid, err)
		}
	}
	return nil
}

// Frozen reports whether the server was frozen by Freeze and not thawed
// since.
func (n *Node) Frozen() bool { return n.frozen.Load() }
