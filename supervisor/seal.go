package supervisor

import (
	"os"
	"strconv"
	"syscall"
	"time"

	procinfo "github.com/airlock-dev/airlock/internal/proc"
)

// sealWait bounds how long a sealed end waits for the processes it killed to
// have ended. One that outlives it (in uninterruptible sleep, or another user's
// that a non-root supervisor cannot signal) leaves the end unsealed: the
// container's exit ends the run, as without a marker.
const sealWait = 200 * time.Millisecond

// sealPoll is how often a sealed end looks whether what it killed ended.
const sealPoll = 100 * time.Microsecond

// sealSandbox ends every process of the sandbox but the supervisor, which
// must be PID 1 of the sandbox's PID namespace (kill(-1) then reaches all of
// them and nothing outside), and reports whether none of them can run any
// more (onlyInitLeft): after it, nothing in the sandbox can write.
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
		// The processes killed enter their exit within microseconds of
		// being scheduled: a finer wait than a millisecond is what the
		// run's end waits for.
		time.Sleep(sealPoll)
	}
}

// onlyInitLeft reports whether /proc (the sandbox's PID namespace) lists no
// process but PID 1 and self that can still run code of its own: the others
// are gone, dead and not yet reaped, or in the kernel's exit, where nothing of
// theirs runs any more (procinfo.Ended). The host checks the same of the
// container's cgroup before it believes the marker. Waiting for the end of
// that exit is not needed: a process the host's follower of the status stream
// is, with its inotify instance, takes milliseconds to be torn down, and a
// process an Engine exec started is reaped by the container's runtime outside
// the sandbox some milliseconds later still; neither writes anything.
func onlyInitLeft(self int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != 1 && pid != self && !procinfo.Ended(pid) {
			return false
		}
	}
	return true
}

// Alone reports whether nothing but PID 1 and this process runs in this PID
// namespace: `supervise alone`, run by the Kubernetes backend in a sandbox's
// primary container before it believes a sealed end marker (a cluster has no
// API that lists a container's processes).
func Alone() bool { return onlyInitLeft(os.Getpid()) }
