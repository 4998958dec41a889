//go:build faults

package faults

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/test/testenv"
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
	engineBack := restartEngine(t)
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

// TestEngineRestartPool: the Docker Engine restarts under a warm pool of 2
// (its parked containers stop with it); afterwards runs work (warm or cold),
// the pool gets back to its size, and `pool drain` leaves nothing. Like
// TestEngineRestart it restarts this machine's dockerd: make faults only.
func TestEngineRestartPool(t *testing.T) {
	e := newEnv(t, poolManifest(2))
	t.Cleanup(func() { e.Run("pool", "drain") })
	e.MustRun("pool", "warm")
	before := e.parkedIDs()
	engineBack := restartEngine(t)
	e.Cli = testenv.Client(t)

	// Runs at once after: none may get a parked sandbox that stopped with the Engine.
	const n = 3
	var right int
	var hosts []string
	for i := range n {
		r := e.Run("run", "--", "sh", "-c", poolScript)
		ok, host := poolRunOK(r)
		if ok {
			right++
		} else {
			t.Errorf("run %d after the Engine restart: %s", i+1, r)
		}
		if slices.Contains(before, host) {
			t.Errorf("run %d got %s, parked before the Engine restarted", i+1, host)
		}
		hosts = append(hosts, host)
	}
	took, p := e.awaitReady(2, 3*time.Minute)
	// A run from the recovered pool is warm.
	parked := e.parkedIDs()
	r := e.Run("run", "--", "sh", "-c", poolScript)
	ok, host := poolRunOK(r)
	warm := ok && slices.Contains(parked, host)
	if !ok {
		t.Errorf("run from the recovered pool: %s", r)
	} else if !warm {
		t.Errorf("the run after the pool recovered got %s, not one of the parked %v", host, parked)
	}
	e.MustRun("pool", "drain")
	left, _ := e.leftoversAfter(leftoverGrace)
	if len(left) > 0 {
		t.Errorf("%d object(s) left after the drain: %v", len(left), left)
	}
	record(t, "Engine restart under a warm pool", "A pool of 2 parked sandboxes; `pkill -TERM dockerd`, then `scripts/engine.sh` starts it again; then 3 runs of `sh -c '"+poolScript+"'` one after the other, the pool awaited back to 2 ready, one more run, `pool drain`.",
		[]benchdoc.Row{
			{Measure: "Engine down and up again", Result: ms(engineBack)},
			{Measure: "runs right after, returning 3 with ok", Result: fmt.Sprintf("%d/%d", right, n), Target: fmt.Sprintf("%d/%d", n, n)},
			{Measure: "runs given a sandbox parked before the restart", Result: fmt.Sprint(countIn(hosts, before)), Target: "0"},
			{Measure: "pool back to 2 ready after those runs", Result: fmt.Sprintf("%s (failures %d, misses %s)", ms(took), p.Failures, missesOf(p)), Target: "yes"},
			{Measure: "a run from the recovered pool", Result: map[bool]string{true: "warm, 3 with ok", false: "not warm or wrong"}[warm], Target: "warm, 3 with ok"},
			{Measure: "Engine objects left after `pool drain`", Result: fmt.Sprint(len(left)), Target: "0"},
		}, "The parked containers stop with the Engine (no restart policy); the daemon's health watch of each ends, and it is removed and replaced; a run that comes first finds it not running, removes it and starts cold.")
}

// countIn counts the elements of list that are in set.
func countIn(list, set []string) int {
	n := 0
	for _, x := range list {
		if slices.Contains(set, x) {
			n++
		}
	}
	return n
}

// restartEngine stops this machine's dockerd (SIGTERM), waits until it is
// gone (it stops answering before it exits), starts it again as CI does
// (scripts/engine.sh) and returns how long the Engine was away. Whatever
// happens after, the test leaves an Engine running.
func restartEngine(t *testing.T) time.Duration {
	t.Helper()
	t.Cleanup(func() { _ = exec.Command("../scripts/engine.sh").Run() })
	start := time.Now()
	if out, err := exec.Command("pkill", "-TERM", "-x", "dockerd").CombinedOutput(); err != nil {
		t.Fatalf("pkill dockerd: %v %s", err, out)
	}
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
	return time.Since(start)
}
