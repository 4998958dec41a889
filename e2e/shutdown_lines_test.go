package e2e

import (
	"strings"
	"testing"
	"time"
)

const shutdownLinesManifest = `
[sandbox]
image = "{{image}}"

[daemons.web]
command = ["sh", "-c", "echo web-up; exec sleep 3600"]
timeout = 2
ready = { log = "web-up", timeout = "10s" }

[daemons.flaky]
command = ["sh", "-c", "exit 3"]
restart = "always"
max_restarts = 2
`

// TestStopDownPrintShutdownLines: `airlock stop` of a detached sandbox prints its
// supervisor's shutdown lines, a daemon that gave up as such (design.md §6 item 6);
// `airlock down` of a running one does too, and -q prints none.
func TestStopDownPrintShutdownLines(t *testing.T) {
	limit(t)
	e := newEnv(t, shutdownLinesManifest)

	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	// flaky gives up after 3 launches (1 s and 2 s of backoff between them).
	eventually(t, 30*time.Second, "flaky to give up", func() bool {
		return strings.Contains(e.MustRun("events", id).Stdout, "daemon.gave_up")
	})
	r := e.MustRun("stop")
	contains(t, "stderr of stop", r.Stderr, "✔ daemon web: shut down\n", "✘ daemon flaky: gave up after 3 launches (exit 3)\n")
	if strings.Contains(r.Stderr, "daemon flaky: shut down") {
		t.Errorf("stop reports flaky, which gave up, as shut down:\n%s", r)
	}
	contains(t, "stdout of stop", r.Stdout, "stopped "+id)

	e.MustRun("up", "-d")
	r = e.MustRun("down")
	contains(t, "stderr of down", r.Stderr, "✔ daemon web: shut down\n")
	contains(t, "stdout of down", r.Stdout, "removed "+id)

	e.MustRun("up", "-d")
	if r = e.MustRun("-q", "down"); r.Stderr != "" || r.Stdout != "" {
		t.Errorf("down -q printed something: %s", r)
	}
}
