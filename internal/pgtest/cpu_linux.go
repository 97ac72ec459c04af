package pgtest

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// clockTicks is the unit of the times in /proc/PID/stat (USER_HZ), 100 a
// second on every Linux architecture Go supports.
const clockTicks = 100

// CPUTime returns the processor time the node's server processes have used
// so far: user and system time of the postmaster and of every live process
// working in its data directory (backends, walreceiver, checkpointer, ...),
// and what the postmaster collected of its children that exited. It reads
// /proc, in steps of 10 ms; subtract two readings to get what the server
// spent between them. It returns an error where /proc is missing.
func (n *Node) CPUTime() (time.Duration, error) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return 0, err
	}
	var ticks int64
	for _, pid := range serverPIDs(n.dataDir) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue // gone meanwhile; the postmaster collects its time
		}
		// pid (comm) state ppid ... utime stime cutime cstime: comm may
		// hold spaces and parentheses, so count from the last ')'. utime
		// is field 14 of the line, the 12th after comm.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 15 {
			continue
		}
		for _, v := range f[11:15] {
			t, err := strconv.ParseInt(string(v), 10, 64)
			if err == nil {
				ticks += t
			}
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// BackendCPUTime returns the processor time the node's live client
// backends (and walsenders) have used so far, in nanoseconds from
// /proc/PID/schedstat: what answering the connected clients cost the
// server, without its background processes. A backend that exited is no
// longer counted, so subtract two readings over the same connections. It
// returns an error where /proc is missing.
func (n *Node) BackendCPUTime() (time.Duration, error) {
	byPID, err := n.BackendCPUTimes()
	var total time.Duration
	for _, d := range byPID {
		total += d
	}
	return total, err
}

// BackendCPUTimes is BackendCPUTime for each live backend, by process ID
// (pg_stat_activity's pid), so that a test can tell what one session cost.
func (n *Node) BackendCPUTimes() (map[int]time.Duration, error) {
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		return nil, err
	}
	byPID := make(map[int]time.Duration)
	for _, pid := range serverPIDs(n.dataDir) {
		dir := "/proc/" + strconv.Itoa(pid) + "/"
		title, err := os.ReadFile(dir + "cmdline")
		// A backend's title is "postgres: user db host(port) activity";
		// background processes name themselves without a peer.
		if err != nil || !bytes.HasPrefix(title, []byte("postgres: ")) || !bytes.Contains(title, []byte(")")) {
			continue
		}
		sched, err := os.ReadFile(dir + "schedstat")
		if err != nil {
			continue
		}
		f := bytes.Fields(sched)
		if len(f) == 0 {
			continue
		}
		if ns, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
			byPID[pid] = time.Duration(ns)
		}
	}
	return byPID, nil
}
