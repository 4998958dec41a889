//go:build linux

package testenv

import "syscall"

// ownGroupDying: a process in its own process group that gets sig when the
// test process dies.
func ownGroupDying(sig syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sig}
}
