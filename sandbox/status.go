package sandbox

import (
	"os"
	"path/filepath"

	"github.com/airlock-dev/airlock/supervisor"
)

// DaemonsUp counts the daemons whose last reported transition leaves them up, from
// the supervisor's status stream in the state dir (read as untrusted input).
func DaemonsUp(stateDir string, total int) int {
	f, err := os.Open(filepath.Join(stateDir, "status.jsonl"))
	if err != nil {
		return 0
	}
	defer f.Close()
	up := map[string]bool{}
	dec := supervisor.NewStatusDecoder(f)
	for {
		ev, err := dec.Next()
		if err != nil {
			break
		}
		switch ev.Kind {
		case "daemon.started", "daemon.ready":
			up[ev.Daemon] = true
		case "daemon.exited", "daemon.gave_up", "daemon.stopped", "daemon.killed":
			up[ev.Daemon] = false
		}
	}
	n := 0
	for _, u := range up {
		if u {
			n++
		}
	}
	if n > total {
		n = total
	}
	return n
}
