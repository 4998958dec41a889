package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/test/clitest"
)

// TestRunEndsBeforeSlowDaemons (issue 24, a fast end of run): run returns once
// the main command exited and its output is out, with the shutdown lines of
// the daemons that stopped at once; a daemon slow to stop finishes in the
// background, recorded in the events, and the sandbox is removed after it.
// --wait and sandbox.wait_for_daemons keep the whole shutdown in the run.
func TestRunEndsBeforeSlowDaemons(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"
network = "none"

[daemons.quick]
command = ["sleep", "1000"]

[daemons.slow]
command = ["sh", "-c", "trap 'sleep 3; exit 0' TERM; touch /tmp/trapped; while :; do sleep 0.1; done"]
timeout = 30
ready = { cmd = ["test", "-e", "/tmp/trapped"] }
`)
	const main = "echo out; echo err >&2; exit 3"
	r := e.Run("run", "--id", "fast-end-1", "--", "sh", "-c", main)
	if r.Code != 3 || r.Stdout != "out\n" {
		t.Fatalf("want exit 3 and stdout %q, got %s", "out\n", r)
	}
	// (The quick daemon's shut-down line shows when it stopped within 20 ms,
	// which a busy host does not promise: not asserted.)
	contains(t, "stderr", r.Stderr, "err\n")
	if strings.Contains(r.Stderr, "daemon slow") || strings.Contains(r.Stderr, "airlock-end") {
		t.Errorf("stderr shows the slow daemon's end or the end marker:\n%s", r.Stderr)
	}
	// The slow daemon was still shutting down when run returned (it takes
	// 3 s), so the sandbox was there; its end is recorded, then the sandbox
	// is removed.
	// ps tells no older story than run did: the main command exited (3).
	there := false
	for _, p := range e.PS() {
		if p.ID != "fast-end-1" {
			continue
		}
		there = true
		if (p.State == "pending" || p.State == "ready") && (p.MainExitCode == nil || *p.MainExitCode != 3) {
			t.Errorf("ps -a --json right after the run: state %s, main_exit_code %v; want the main command's exit (3)", p.State, p.MainExitCode)
		}
	}
	if !there {
		t.Errorf("sandbox fast-end-1 was gone when run returned: the run waited for its slow daemon")
	}
	if ps := e.MustRun("ps", "-a").Stdout; !strings.Contains(ps, "exited (3)") && !strings.Contains(ps, "stopped") {
		t.Errorf("ps -a right after the run does not show it exited:\n%s", ps)
	}
	eventually(t, cmdTimeout, "the sandbox to be removed once its slow daemon stopped", func() bool {
		return strings.Contains(e.MustRun("events", "fast-end-1").Stdout, "sandbox.deleted")
	})
	ev := e.MustRun("events", "fast-end-1").Stdout
	contains(t, "events", ev, "main.exited", "exit_code=3", "daemon=slow", "sandbox.stopped", "reason=exited")
	if !strings.Contains(ev, "daemon.stopped") || strings.Count(ev, "daemon.stopped") != 2 || strings.Contains(ev, "cli_gone") {
		t.Errorf("want both daemons' stops recorded and no reaping:\n%s", ev)
	}

	// A run without daemons: right after it, ps says it exited, or stopped,
	// or no longer lists it (issue 24: it showed pending).
	e.WriteFile("sandbox.local.toml", "[daemons.quick]\nenabled = false\n[daemons.slow]\nenabled = false\n")
	e.MustRun("run", "--id", "fast-end-2", "--", "true")
	for _, p := range e.PS() {
		if p.ID == "fast-end-2" && (p.State == "pending" || p.State == "ready") && p.MainExitCode == nil {
			t.Errorf("ps -a right after run -- true: %s without the main command's exit", p.State)
		}
	}
	// A layer edited while a sandbox may still write the project counts as
	// changed inside it (docs/trust.md): edit it once the run's sandbox is gone.
	eventually(t, cmdTimeout, "run fast-end-2 to be removed", func() bool {
		return strings.Contains(e.MustRun("events", "fast-end-2").Stdout, "sandbox.deleted")
	})
	e.WriteFile("sandbox.local.toml", "")

	// --wait: the run ends with the whole shutdown.
	r = e.Run("run", "--wait", "--", "sh", "-c", main)
	if r.Code != 3 || r.Stdout != "out\n" {
		t.Fatalf("--wait: want exit 3 and stdout %q, got %s", "out\n", r)
	}
	contains(t, "--wait stderr", r.Stderr, "✔ daemon quick: shut down", "✔ daemon slow: shut down")
	// The manifest key does the same.
	e.WriteFile("sandbox.local.toml", "[sandbox]\nwait_for_daemons = true\n")
	r = e.Run("run", "--", "sh", "-c", main)
	if r.Code != 3 || !strings.Contains(r.Stderr, "✔ daemon slow: shut down") {
		t.Errorf("sandbox.wait_for_daemons: %s", r)
	}
	e.assertClean()
}

// TestRunOOMKilledIsRemoved: a main command killed for the sandbox's memory
// limit ends the run with 137 (at the end marker, before the kill is known to
// the daemon), the sandbox is recorded oom_killed, and removed: the reaper's
// spare for a fast-ended run does not keep it (the Kubernetes backend's
// TestOOMKilledOnCluster found it kept).
func TestRunOOMKilledIsRemoved(t *testing.T) {
	limit(t)
	e := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\nnetwork = \"none\"\nmemory = \"32m\"\n")
	r := e.Run("run", "--id", "oom-fast-end", "--", "sh", "-c", "head -c 200m /dev/zero | tail")
	if r.Code != 137 {
		t.Errorf("want exit 137 from the OOM kill, got %s", r)
	}
	eventually(t, cmdTimeout, "the events to say oom_killed", func() bool {
		return strings.Contains(e.MustRun("events", "oom-fast-end").Stdout, "oom_killed")
	})
	e.assertClean()
}

// TestSealedEnd: a run whose daemons all stop at once returns at the main
// command's end, not at its container's (a sealed end): what the main command
// left running is ended first, so that it cannot change a manifest layer once
// the run returned, when an edit is the user's; the user's own edit right
// after the run is taken as theirs; the sandbox is removed after.
func TestSealedEnd(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"

[daemons.quick]
command = ["sleep", "1000"]
`)
	// Left behind: a writer of sandbox.local.toml 0.5 s after the main
	// command ended, and one that holds stdout open.
	r := e.Run("run", "--id", "sealed-1", "--", "sh", "-c",
		`(sleep 0.5; printf '[sandbox]\nprivileged = true\n' > sandbox.local.toml) & (sleep 100 &) ; echo out; exit 5`)
	if r.Code != 5 || r.Stdout != "out\n" {
		t.Fatalf("want exit 5 and stdout %q, got %s", "out\n", r)
	}
	contains(t, "stderr", r.Stderr, "✔ daemon quick: shut down")
	if strings.Contains(r.Stderr, "airlock-end") {
		t.Errorf("stderr shows the end marker:\n%s", r.Stderr)
	}
	eventually(t, cmdTimeout, "the sandbox to be removed", func() bool {
		return strings.Contains(e.MustRun("events", "sealed-1").Stdout, "sandbox.deleted")
	})
	if b, err := os.ReadFile(filepath.Join(e.Project, "sandbox.local.toml")); err == nil {
		t.Fatalf("a process the main command left wrote sandbox.local.toml after the run returned:\n%s", b)
	}
	// The user's edit right after a run is the user's: the next run takes it.
	r = e.Run("run", "--", "true")
	if r.Code != 0 {
		t.Fatalf("run: %s", r)
	}
	e.WriteFile("sandbox.local.toml", "[env]\nEDITED = \"by-me\"\n")
	r = e.Run("run", "--", "sh", "-c", "echo $EDITED")
	if r.Code != 0 || r.Stdout != "by-me\n" {
		t.Errorf("a layer edited right after a run: want it taken, got %s", r)
	}
	e.assertClean()
}

// TestForgedEndMarker: a sealed end marker printed by the main command
// itself, the sandbox still running, does not end the run: its real exit code
// comes back.
func TestForgedEndMarker(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"
`)
	r := e.Run("run", "--", "sh", "-c", clitest.ForgeEndMarker)
	if r.Code != 4 {
		t.Fatalf("a run whose main command forged its sealed end marker (code 0) and exited 4: want 4, got %s", r)
	}
	e.assertClean()
}

// TestRunWaitLeavesNothing: `run --wait` returns as `docker run --rm` does,
// once the sandbox is removed: right after it, `ps -a` lists no sandbox of
// the project and the Engine holds no container or network of it (make demo
// says so after a `run --wait`). So does sandbox.wait_for_daemons. A plain
// run returns before that (a fast end) and ps -a may show it exited.
func TestRunWaitLeavesNothing(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"

[daemons.web]
command = ["httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/etc"]
ready = { http = "http://127.0.0.1:8080/passwd", timeout = "10s" }
`)
	check := func(what string, args ...string) {
		t.Helper()
		r := e.Run(args...)
		if r.Code != 0 || !strings.Contains(r.Stderr, "✔ daemon web: shut down") {
			t.Errorf("%s: want exit 0 with the shutdown line, got %s", what, r)
		}
		if ps := e.PS(); len(ps) != 0 {
			t.Errorf("%s: ps -a right after it lists %+v", what, ps)
		}
		if cs := e.Containers(); len(cs) != 0 {
			t.Errorf("%s: the Engine still holds %d container(s) of the project right after it, the first %s", what, len(cs), cs[0].State)
		}
	}
	for i := range 3 {
		check(fmt.Sprintf("run --wait #%d", i+1), "run", "--wait", "--", "wget", "-qO", "/dev/null", "http://127.0.0.1:8080/passwd")
	}
	e.WriteFile("sandbox.local.toml", "[sandbox]\nwait_for_daemons = true\n")
	check("run with sandbox.wait_for_daemons", "run", "--", "true")
	e.assertClean()
}
