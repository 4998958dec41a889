package control

import (
	"fmt"
	"os"
	"strings"
)

// ProcessState reads /proc/PID/stat: the process's state letter ("Z" for a zombie)
// and its start time (field 22, clock ticks since boot), which tells a reused pid
// apart from the process a record names. ok is false when there is no such process.
func ProcessState(pid int) (state, start string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return "", "", false
	}
	return f[0], f[19], true
}
