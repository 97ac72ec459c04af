package pgtest

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// procPIDs lists the process ids in /proc.
func procPIDs() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil
	}
	pids := make([]int, 0, len(names))
	for _, name := range names {
		if pid, err := strconv.Atoi(name); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// groupAlive reports whether any process of process group pgid is still
// running. Zombies do not count: they hold no shared memory and no ports.
func groupAlive(pgid int) bool {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return groupAliveBySignal(pgid)
	}
	for _, pid := range procPIDs() {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// Format: pid (comm) state ppid pgrp ...; comm may hold spaces and
		// parentheses, so parse from the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 3 || f[0][0] == 'Z' || f[0][0] == 'X' {
			continue
		}
		if g, err := strconv.Atoi(string(f[2])); err == nil && g == pgid {
			return true
		}
	}
	return false
}

// serverPIDs returns the live processes whose working directory is dir.
//
// Every PostgreSQL server process works in its data directory, and this is
// how the harness finds them: the postmaster's children each call setsid(),
// so they are not in the postmaster's process group, and once the
// postmaster is gone they are no longer its children either. A zombie has
// no working directory and is not listed.
func serverPIDs(dir string) []int {
	var pids []int
	for _, pid := range procPIDs() {
		cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
		if err == nil && cwd == dir {
			pids = append(pids, pid)
		}
	}
	return pids
}

// removeSysVShm marks a System V shared memory segment for removal. A server
// killed with SIGKILL leaves its small interlock segment behind.
func removeSysVShm(id int) {
	const ipcRMID = 0
	_, _, _ = syscall.Syscall(syscall.SYS_SHMCTL, uintptr(id), ipcRMID, 0)
}

// canFreeze reports whether Node.Freeze can find a server's processes.
func canFreeze() bool { return true }

// procStopped reports whether process pid is stopped by a signal (state T)
// or no longer runs at all (a zombie, or gone).
func procStopped(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) == 0 {
		return false
	}
	switch f[0][0] {
	case 'T', 't', 'Z', 'X':
		return true
	}
	return false
}
