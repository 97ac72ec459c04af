//go:build !linux

package pgtest

import "syscall"

// dieWithParent does nothing where the kernel offers no parent-death
// signal: Close (or the next process's sweep) must end the children.
func dieWithParent(*syscall.SysProcAttr) {}

// pidsUnder cannot find processes by working directory without /proc.
func pidsUnder(string) []int { return nil }

// memDir returns "": etcd keeps its data in the cluster directory.
func memDir() string { return "" }
