package pgtest

import (
	"errors"
	"syscall"
	"time"
)

func groupAliveBySignal(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// waitGroupGone waits until process group pgid is empty. After grace it
// kills whatever is left and waits a little longer. It reports whether the
// group is gone.
func waitGroupGone(pgid int, grace time.Duration) bool {
	if pollUntil(grace, func() bool { return !groupAlive(pgid) }) {
		return true
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return pollUntil(5*time.Second, func() bool { return !groupAlive(pgid) })
}

// pollUntil checks cond every few milliseconds until it holds or d passes.
func pollUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
