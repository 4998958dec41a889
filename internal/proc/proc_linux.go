//go:build linux

package proc

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// readState reads /proc/PID/stat (see State).
func readState(pid int) (state, start string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return "", "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return "", "", false
	}
	return f[0], f[19], true
}

// readArgs reads /proc/PID/cmdline of a process whose /proc/PID the current user
// owns (see Args).
func readArgs(pid int) ([]string, bool) {
	dir := fmt.Sprintf("/proc/%d", pid)
	st, err := os.Stat(dir)
	if err != nil {
		return nil, false
	}
	if s, ok := st.Sys().(*syscall.Stat_t); !ok || int(s.Uid) != os.Getuid() {
		return nil, false
	}
	b, err := os.ReadFile(dir + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil, false
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), true
}
