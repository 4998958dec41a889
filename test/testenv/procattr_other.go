//go:build !linux

package testenv

import "syscall"

// ownGroupDying: a process in its own process group (no parent-death signal
// outside Linux; the stand-in remote Engine needs Linux anyway).
func ownGroupDying(syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
