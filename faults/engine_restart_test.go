//go:build faults

package faults

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/benchdoc"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// TestEngineRestart: with `up -d` sandboxes running, the Docker Engine restarts
// (its containers stop: no restart policy); the daemon records them stopped, and
// `airlock up -d` afterwards starts them again. It restarts this machine's dockerd
// (stop, then ./scripts/engine.sh), so it runs in make faults only, alone.
func TestEngineRestart(t *testing.T) {
	e := newEnv(t, `
[sandbox]
image = "{{image}}"

[daemons.web]
command = ["httpd", "-f", "-p", "8080"]
ready = { tcp = "127.0.0.1:8080", timeout = "10s" }
`)
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	// Whatever happens below, leave an Engine running.
	t.Cleanup(func() { _ = exec.Command("../scripts/engine.sh").Run() })

	start := time.Now()
	if out, err := exec.Command("pkill", "-TERM", "-x", "dockerd").CombinedOutput(); err != nil {
		t.Fatalf("pkill dockerd: %v %s", err, out)
	}
	// Wait until dockerd is gone (it stops answering before it exits), then
	// start it again as CI does.
	deadline := time.Now().Add(90 * time.Second)
	for exec.Command("pgrep", "-x", "dockerd").Run() == nil {
		if time.Now().After(deadline) {
			t.Fatal("dockerd still runs 90 s after SIGTERM")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, err := exec.Command("../scripts/engine.sh").CombinedOutput(); err != nil {
		t.Fatalf("scripts/engine.sh: %v\n%s", err, out)
	}
	engineBack := time.Since(start)
	e.Cli = testenv.Client(t)

	// The daemon sees what the Engine did: the sandbox stopped.
	var state string
	recorded := time.Now()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ps := e.PS()
		if len(ps) == 1 {
			state = ps[0].State
		}
		if state == "stopped" || state == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("60 s after the Engine restarted, ps -a says %q, want stopped (events:\n%s)", state, e.Run("events", id).Stdout)
		}
	}
	recordedAfter := time.Since(recorded)
	ev := e.MustRun("events", id).Stdout

	// And `up -d` starts it again.
	again := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	// The daemon answers again (an empty httpd answers 404).
	e.MustRun("exec", "--", "sh", "-c", "wget -qO- http://127.0.0.1:8080/ 2>&1 | grep -q 'Not Found'")
	e.MustRun("down")
	if again != id || !strings.Contains(ev, "sandbox.stopped") {
		t.Errorf("after the restart: up -d gave %q (want %q); events:\n%s", again, id, ev)
	}
	record(t, "Engine restart", "An `up -d` sandbox with an httpd daemon; `pkill -TERM dockerd`, then `scripts/engine.sh` starts it again.",
		[]benchdoc.Row{
			{Measure: "Engine down and up again", Result: ms(engineBack)},
			{Measure: "state recorded after the Engine was back", Result: state + " (" + ms(recordedAfter) + ")", Target: "stopped or failed"},
			{Measure: "`airlock up -d` afterwards", Result: map[bool]string{true: "the same sandbox, started again; exec works", false: "did not start the same sandbox"}[again == id], Target: "works"},
		}, "The sandbox's container stops with the Engine (no restart policy). Its `die` event may be lost while the Engine goes down; the daemon then records the stop when its status-stream follower finds the container stopped.")
}
