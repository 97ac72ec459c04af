package kubetest

import "syscall"

// childAttr puts a server in a process group of its own, so that a stop
// reaches nothing of the test's, and kills it should the test process
// die first.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
