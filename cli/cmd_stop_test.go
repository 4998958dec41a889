package cli

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/client"
)

// stop asks the daemon, waits on the event stream until the sandbox is
// stopped, and shows the supervisor's shutdown lines (the primary's stderr,
// attached through the daemon before the stop) on stderr; it asks no Engine.
func TestStopShowsShutdownLines(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "r1"})
	lines := "✔ daemon web: shut down\n✘ daemon flaky: gave up after 3 launches (exit 3)\n"
	f.engine.setStderr("c-r1", lines)

	r := f.run("stop", "r1")
	if r.code != 0 || r.stdout != "stopped r1\n" || r.stderr != lines {
		t.Fatalf("stop r1: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	f.assertRequests("GET /v1/sandboxes/r1", "POST /v1/sandboxes/r1/attach", "POST /v1/sandboxes/r1/stop", "GET /v1/sandboxes/r1", "GET /v1/sandboxes/r1/events")
	ev := f.requests("GET /v1/sandboxes/r1/events")[0]
	if ev.Query.Get("follow") != "1" || ev.Query.Get("from") != "2" {
		t.Errorf("stop follows the events with %s, want follow=1 from=2", ev)
	}
	if f.state("r1") != client.StateStopped {
		t.Errorf("state %s", f.state("r1"))
	}
	if reqs := f.engine.requests("GET", ".*"); len(reqs) != 0 {
		t.Errorf("stop asked the Engine: %v", reqs)
	}
}

// -q: no output, and the shutdown lines are not asked for.
func TestStopQuiet(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "r1"})
	f.engine.setStderr("c-r1", "✔ daemon web: shut down\n")
	r := f.run("stop", "-q", "r1")
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Errorf("stop -q: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if f.state("r1") != client.StateStopped {
		t.Errorf("state %s", f.state("r1"))
	}
	if reqs := f.requests("POST /v1/sandboxes/r1/attach"); len(reqs) != 0 {
		t.Errorf("stop -q attached: %v", reqs)
	}
}

// Without an Engine answering, stop still stops; only the lines are missing.
func TestStopWithoutTheEngine(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "r1", Engine: &client.Engine{Host: "unix://" + t.TempDir() + "/none.sock"}})
	r := f.run("stop", "r1")
	if r.code != 0 || r.stdout != "stopped r1\n" || r.stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// A sandbox that is not running is not asked to stop, and stop says it is stopped.
func TestStopNotRunning(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "s1", State: client.StateStopped})
	f.add(client.Sandbox{ID: "f2", State: client.StateFailed})
	for _, id := range []string{"s1", "f2"} {
		r := f.run("stop", id)
		if r.code != 0 || r.stdout != "stopped "+id+"\n" {
			t.Errorf("stop %s: exit %d, stdout %q, stderr %q", id, r.code, r.stdout, r.stderr)
		}
	}
	if s := f.requests("POST /v1/sandboxes/s1/stop", "POST /v1/sandboxes/f2/stop"); len(s) != 0 {
		t.Errorf("stop of a sandbox not running asked the daemon: %v", s)
	}
}

func TestStopErrors(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "gone", State: client.StateStopped})
	f.emit("gone", client.Event{Kind: "sandbox.deleted", State: client.StateDeleted})
	f.add(client.Sandbox{ID: "r1"})
	f.fail("POST", "/v1/sandboxes/r1/stop", &client.Error{Reason: client.ReasonInvalidState, Message: "sandbox r1 is deleting"})
	f.add(client.Sandbox{ID: "r2"})
	f.fail("POST", "/v1/sandboxes/r2/stop", &client.Error{Reason: client.ReasonInternal, Message: "cannot stop sandbox r2: boom"})

	f.assertFailures([]cliFailure{
		{[]string{"stop", "-q", "nosuch"}, ExitFailure, "airlock: sandbox nosuch not found\n"},
		{[]string{"stop", "-q", "gone"}, ExitFailure, "airlock: sandbox gone was deleted\n"},
		{[]string{"stop", "-q", "r1"}, ExitFailure, "airlock: sandbox r1 is deleting\n"},
		{[]string{"stop", "-q", "r2"}, ExitAirlock, "airlock: cannot stop sandbox r2: boom\n"},
		{[]string{"stop", "a", "b"}, ExitUsage, "airlock: accepts at most 1 arg(s), received 2\n"},
		{[]string{"stop", "r1", "--label", "a=b"}, ExitUsage, "airlock: give a sandbox or --label, not both\n"},
	})
}

func TestStopByLabelAndProject(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	file, dir := projectFile(t)
	f.add(client.Sandbox{ID: "a1", Labels: map[string]string{"pool": "x"}})
	f.add(client.Sandbox{ID: "b2", Labels: map[string]string{"pool": "x"}})
	f.add(client.Sandbox{ID: "c3", Labels: map[string]string{"pool": "y"}, Project: dir})

	r := f.run("-q", "stop", "--label", "pool=x")
	if r.code != 0 || f.state("a1") != client.StateStopped || f.state("b2") != client.StateStopped || f.state("c3") != client.StateReady {
		t.Errorf("stop --label pool=x: exit %d, stderr %q; states %s %s %s", r.code, r.stderr, f.state("a1"), f.state("b2"), f.state("c3"))
	}

	r = f.run("--file", file, "stop")
	if r.code != 0 || r.stdout != "stopped c3\n" || f.state("c3") != client.StateStopped {
		t.Errorf("stop of the project's sandbox: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(f.requestList(), "POST /v1/sandboxes/c3/stop") {
		t.Errorf("no stop request for c3:\n%s", f.requestList())
	}
}
