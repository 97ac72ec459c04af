//go:build !linux

package kubetest

import "syscall"

// childAttr puts a server in a process group of its own, so that a stop
// reaches nothing of the test's.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
