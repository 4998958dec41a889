//go:build darwin

package control

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// szomb is p_stat of a zombie (<sys/proc.h>).
const szomb = 5

// processState asks sysctl kern.proc.pid (see ProcessState): the state is "Z"
// for a zombie, else "S"; the start time is p_starttime, seconds.microseconds.
func processState(pid int) (state, start string, ok bool) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || int(kp.Proc.P_pid) != pid {
		return "", "", false
	}
	state = "S"
	if kp.Proc.P_stat == szomb {
		state = "Z"
	}
	t := kp.Proc.P_starttime
	return state, fmt.Sprintf("%d.%06d", t.Sec, t.Usec), true
}

// daemonProcess reports whether pid is a process of the current user's whose
// command line is `… daemon run …` (kern.procargs2).
func daemonProcess(pid int) bool {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || int(kp.Proc.P_pid) != pid || int(kp.Eproc.Ucred.Uid) != os.Getuid() {
		return false
	}
	raw, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil {
		return false
	}
	return isDaemonArgv(parseProcArgs2(raw))
}
