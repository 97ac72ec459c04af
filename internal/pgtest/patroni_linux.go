package pgtest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// dieWithParent asks the kernel to kill the child when the test process
// dies, so a test binary killed by -timeout leaves no Patroni or etcd
// behind (the PostgreSQL servers Patroni started are orphans by design;
// the next process's sweep kills them).
//
// The signal is set after the child has changed its credentials, so it
// survives the switch to the postgres user. A uid change made by the child
// itself (setpriv, su) would clear it: that is why Patroni is started with
// SysProcAttr.Credential and not through setpriv.
//
// The kernel sends the signal when the thread that started the child ends,
// not only the process. Go ends a thread only when a goroutine locked to it
// (runtime.LockOSThread) returns without unlocking; the harness starts its
// children from goroutines that are not locked.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// pidsUnder returns the live processes whose working directory is dir or
// lies below it. Patroni works in its member directory, the helper it
// spawns to start PostgreSQL inherits that, and every server process works
// in its data directory below it.
func pidsUnder(dir string) []int {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var pids []int
	for _, pid := range procPIDs() {
		cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
		if err == nil && (cwd == dir || strings.HasPrefix(cwd, prefix)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// memDir returns /dev/shm, where Linux mounts a memory file system (tmpfs),
// or "" when it is not a directory.
func memDir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return ""
}
