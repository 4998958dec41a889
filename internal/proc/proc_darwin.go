//go:build darwin

package proc

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// szomb is p_stat of a zombie (<sys/proc.h>).
const szomb = 5

// readState asks sysctl kern.proc.pid (see State): the state is "Z" for a zombie,
// else "S"; the start time is p_starttime, seconds.microseconds.
func readState(pid int) (state, start string, ok bool) {
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

// readArgs asks sysctl kern.procargs2 for the command line of a process of the
// current user's (see Args).
func readArgs(pid int) ([]string, bool) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || int(kp.Proc.P_pid) != pid || int(kp.Eproc.Ucred.Uid) != os.Getuid() {
		return nil, false
	}
	raw, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil {
		return nil, false
	}
	argv := parseProcArgs2(raw)
	return argv, argv != nil
}

// readEnded cannot tell here (see Ended).
func readEnded(int) bool { return false }
