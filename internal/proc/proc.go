// Package proc reads what the OS says about a process by its PID: its state
// and start time (which tells a reused PID apart from the process a record
// names), and the command line of a process of the current user's. Linux reads
// /proc, macOS asks sysctl; elsewhere only whether the process exists is known.
package proc

// State returns a process's state letter ("Z" for a zombie) and its start
// time; both are read on the same host, so only the equality of two start
// times matters. ok is false when there is no such process. On Linux they come
// from /proc/PID/stat (the start time is field 22, clock ticks since boot); on
// macOS from sysctl kern.proc.pid (the state is "Z" or "S", the start time
// seconds.microseconds); elsewhere the state is "S" and the start time empty.
func State(pid int) (state, start string, ok bool) {
	if pid <= 0 {
		return "", "", false
	}
	return readState(pid)
}

// Ended reports whether process pid can run no more code of its own: it is
// gone, or every thread of it is a zombie or in the kernel's exit (killed,
// past the point where it could return to its program), where only the
// kernel's teardown is left: closing an inotify instance, for one, waits for
// the kernel's next grace period, milliseconds on a busy machine, and the
// process is listed (in /proc, in its cgroup) until it is done. A thread still
// in a system call (a write under way) is not ended. On Linux from
// /proc/PID/task/TID/stat (the state, and the flags' PF_EXITING); elsewhere
// false: the OS does not tell.
func Ended(pid int) bool {
	if pid <= 0 {
		return false
	}
	return readEnded(pid)
}

// Args returns the command line of pid when it is a process of the current
// user's: from /proc/PID/cmdline on Linux, sysctl kern.procargs2 on macOS. ok
// is false for another user's process, a gone one, or where the OS does not
// tell.
func Args(pid int) (argv []string, ok bool) {
	if pid <= 0 {
		return nil, false
	}
	return readArgs(pid)
}
