package daemonfiles

import "github.com/airlock-dev/airlock/internal/proc"

// daemonProcess reports whether pid is a process of the current user's whose
// command line is `… daemon run …` (HoldsLock where /proc/locks cannot be read).
func daemonProcess(pid int) bool {
	argv, ok := proc.Args(pid)
	return ok && isDaemonArgv(argv)
}

// isDaemonArgv reports whether argv is airlock's daemon: "daemon run" follows
// the program name (after global flags, if any).
func isDaemonArgv(argv []string) bool {
	for i := 1; i+1 < len(argv); i++ {
		if argv[i] == "daemon" && argv[i+1] == "run" {
			return true
		}
	}
	return false
}
