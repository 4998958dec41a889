package control

import "github.com/airlock-dev/airlock/internal/proc"

// ProcessState is proc.State (the state letter and start time of a process),
// for the watcher's processAlive.
func ProcessState(pid int) (state, start string, ok bool) { return proc.State(pid) }
