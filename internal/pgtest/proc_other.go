//go:build !linux

package pgtest

// groupAlive reports whether any process of process group pgid still exists.
// Without /proc, zombies count as alive.
func groupAlive(pgid int) bool { return groupAliveBySignal(pgid) }

// serverPIDs cannot find server processes without /proc; only the
// postmaster is tracked there.
func serverPIDs(string) []int { return nil }

// removeSysVShm is a no-op where the segment cannot be removed portably; the
// next server start on the same data directory reclaims it.
func removeSysVShm(int) {}

// canFreeze reports whether Node.Freeze can find a server's processes: not
// without /proc.
func canFreeze() bool { return false }

func procStopped(int) bool { return false }
