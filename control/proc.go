package control

// ProcessState returns a process's state letter ("Z" for a zombie) and its start
// time, which tells a reused pid apart from the process a record names (both
// read on the same host, so only equality matters). ok is false when there is no
// such process. On Linux they come from /proc/PID/stat (the start time is field
// 22, clock ticks since boot); on macOS from sysctl kern.proc.pid.
func ProcessState(pid int) (state, start string, ok bool) {
	if pid <= 0 {
		return "", "", false
	}
	return processState(pid)
}
