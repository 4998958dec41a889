package supervisor

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// sealWait bounds how long a sealed end waits for the processes it killed to
// be gone. One that outlives it (in uninterruptible sleep, or another user's
// that a non-root supervisor cannot signal) leaves the end unsealed: the
// container's exit ends the run, as without a marker.
const sealWait = 200 * time.Millisecond

// sealSandbox ends every process of the sandbox but the supervisor, which
// must be PID 1 of the sandbox's PID namespace (kill(-1) then reaches all of
// them and nothing outside), and reports whether none is left once the
// reaper collected them: after it, nothing in the sandbox can write.
func sealSandbox(wait time.Duration) bool {
	if os.Getpid() != 1 {
		return false
	}
	if err := syscall.Kill(-1, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return false
	}
	deadline := time.Now().Add(wait)
	for {
		if onlyInitLeft(1) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// onlyInitLeft reports whether /proc (the sandbox's PID namespace) lists no
// live process but PID 1 and self: the others are gone, or dead and not yet
// reaped (the host checks the same through the Engine before it believes the
// marker: a container's cgroup lists no dead process). A process an Engine
// exec started (the host's followers of the status stream, a command channel)
// is reaped by the container's runtime outside the sandbox, some milliseconds
// after it died: waiting for that is not needed, since a dead process writes
// nothing.
func onlyInitLeft(self int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != 1 && pid != self && !dead(e.Name()) {
			return false
		}
	}
	return true
}

// dead reports whether process pid (a name in /proc) has ended and waits to
// be reaped: it is a zombie, and no thread of it runs on (a thread group's
// leader that ended before its other threads shows as a zombie while they
// run). One gone meanwhile is dead too.
func dead(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	// The state follows the command's name, which is in parentheses and may
	// hold any byte: the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X') {
		return false
	}
	tasks, err := os.ReadDir("/proc/" + pid + "/task")
	if err != nil {
		return os.IsNotExist(err)
	}
	return len(tasks) <= 1
}

// Alone reports whether nothing but PID 1 and this process runs in this PID
// namespace: `supervise alone`, run by the Kubernetes backend in a sandbox's
// primary container before it believes a sealed end marker (a cluster has no
// API that lists a container's processes).
func Alone() bool { return onlyInitLeft(os.Getpid()) }
