//go:build linux

package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
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

// pfExiting is the kernel's PF_EXITING, in the flags of /proc/PID/stat
// (field 9): set as a thread enters its exit, after which it never returns to
// its program.
const pfExiting = 0x4

// readEnded reads the state and flags of every thread of pid (see Ended).
func readEnded(pid int) bool {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // this thread is gone
			}
			return false
		}
		if !threadEnded(string(b)) {
			return false
		}
	}
	return true
}

// threadEnded reports whether a thread's stat line says it is a zombie (or
// dead) or in its exit.
func threadEnded(stat string) bool {
	i := strings.LastIndexByte(stat, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 7 {
		return false
	}
	if f[0] == "Z" || f[0] == "X" || f[0] == "x" {
		return true
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfExiting != 0
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
