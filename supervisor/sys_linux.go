//go:build linux

package supervisor

import "golang.org/x/sys/unix"

// The supervisor's Linux-only system calls, kept apart so that the package (its
// spec and status types, which the CLI and the control daemon use) builds on
// macOS too. The supervisor itself runs only on Linux, as PID 1 of a sandbox
// (see sys_other.go).

// setNoNewPrivs sets no_new_privs on the calling thread.
func setNoNewPrivs() error { return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }

// setChildSubreaper makes the process a child subreaper.
func setChildSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// isTermios reports whether fd is a terminal.
func isTermios(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}
