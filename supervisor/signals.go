package supervisor

import (
	"slices"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/manifest/specrules"
)

// signalByName returns the signal a daemon's `signal` names: one of
// specrules.Signals (design.md §3), the list manifest validation checks too, by
// the kernel's number for it.
func signalByName(name string) (syscall.Signal, bool) {
	if !slices.Contains(specrules.Signals, name) {
		return 0, false
	}
	s := unix.SignalNum(name)
	return s, s != 0
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
