//go:build linux

package supervisor

import (
	"bytes"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

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

// nextData returns the offset of the first byte of data (not a hole of a sparse
// file) at or after off in f, size when there is none; ok is false when the file
// system cannot tell (then every byte counts as data).
func nextData(f interface{ Fd() uintptr }, off, size int64) (int64, bool) {
	d, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	switch {
	case err == unix.ENXIO:
		return size, true
	case err != nil:
		return off, false
	}
	return min(d, size), true
}

// switchUser makes the calling process c's user, groups first (setgroups,
// setgid, setuid act on every thread of a Go process): what `supervise exec`
// does before it runs a command as the main command's user.
func switchUser(c *syscall.Credential) error {
	groups := make([]int, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = int(g)
	}
	if err := syscall.Setgroups(groups); err != nil {
		return err
	}
	if err := syscall.Setgid(int(c.Gid)); err != nil {
		return err
	}
	return syscall.Setuid(int(c.Uid))
}

// processEnded reports whether process pid has exited (a zombie, or gone
// once reaped); a pid of 0 or less is no process.
func processEnded(pid int) bool {
	if pid <= 0 {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command, which is in parentheses and may hold any.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
