package supervisor

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxSignal is the highest signal number Linux has (SIGRTMAX).
const maxSignal = 64

// ParseSignal reads a signal as `airlock supervise signal` takes it: a name
// with or without SIG, in any case (TERM, SIGTERM, int), or a number (15).
func ParseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > maxSignal {
			return 0, fmt.Errorf("cannot use signal %s: want a number from 1 to %d", s, maxSignal)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("cannot use signal %q: not a signal name (TERM, SIGINT, …) or number", s)
}

// SignalInit sends sig to PID 1 of the caller's PID namespace, the supervisor
// of the sandbox it runs in: the Kubernetes backend forwards the CLI's signals
// this way, Kubernetes having no API to signal a container. The kernel drops
// a signal sent to a namespace's init from inside it unless init handles it,
// so SIGKILL and SIGSTOP are refused here rather than dropped silently.
func SignalInit(sig syscall.Signal) error {
	if sig == unix.SIGKILL || sig == unix.SIGSTOP {
		return fmt.Errorf("cannot send %s to the supervisor: the kernel drops it when sent from inside the sandbox (delete the sandbox instead)", signalName(sig))
	}
	return sendSignal(1, sig)
}

// sendSignal sends sig to pid.
func sendSignal(pid int, sig syscall.Signal) error {
	if err := unix.Kill(pid, sig); err != nil {
		return fmt.Errorf("cannot send %s to process %d: %w", signalName(sig), pid, err)
	}
	return nil
}
