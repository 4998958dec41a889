//go:build !linux && !darwin

package control

import "syscall"

// processState knows only whether the process exists (see ProcessState).
func processState(pid int) (state, start string, ok bool) {
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return "", "", false
	}
	return "S", "", true
}

// daemonProcess cannot tell here.
func daemonProcess(int) bool { return false }
