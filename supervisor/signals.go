package supervisor

import (
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// daemonSignals are the signals a daemon's `signal` may name (DESIGN §3).
var daemonSignals = map[string]syscall.Signal{
	"SIGTERM": unix.SIGTERM,
	"SIGINT":  unix.SIGINT,
	"SIGHUP":  unix.SIGHUP,
	"SIGQUIT": unix.SIGQUIT,
	"SIGUSR1": unix.SIGUSR1,
	"SIGUSR2": unix.SIGUSR2,
	"SIGKILL": unix.SIGKILL,
}

func signalByName(name string) (syscall.Signal, bool) {
	s, ok := daemonSignals[name]
	return s, ok
}

// signalName returns "SIGTERM" for a signal, or "SIG<n>" for one without a
// name known to the kernel's table.
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return "SIG" + strconv.Itoa(int(s))
}

// knownSignalName reports whether name is one the status stream may carry.
func knownSignalName(name string) bool {
	if unix.SignalNum(name) != 0 {
		return true
	}
	if len(name) > 3 && name[:3] == "SIG" {
		n, err := strconv.Atoi(name[3:])
		return err == nil && n > 0 && n < 65
	}
	return false
}
