//go:build !linux && !darwin

package proc

import "syscall"

// readState knows only whether the process exists (see State).
func readState(pid int) (state, start string, ok bool) {
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return "", "", false
	}
	return "S", "", true
}

// readArgs cannot tell here.
func readArgs(int) ([]string, bool) { return nil, false }

// readEnded cannot tell here (see Ended).
func readEnded(int) bool { return false }
