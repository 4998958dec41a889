package cli

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/client"
)

func TestRmStoppedSandbox(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "s1", State: client.StateStopped})

	r := f.run("rm", "s1")
	if r.code != 0 || r.stdout != "removed s1\n" || r.stderr != "" {
		t.Fatalf("rm s1: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// The delete is accepted at once; rm waits on the event stream until it is done.
	f.assertRequests("GET /v1/sandboxes/s1", "DELETE /v1/sandboxes/s1", "GET /v1/sandboxes/s1", "GET /v1/sandboxes/s1/events")
	ev := f.requests("GET /v1/sandboxes/s1/events")[0]
	if ev.Query.Get("follow") != "1" || ev.Query.Get("from") != "3" {
		t.Errorf("rm follows the events with %s, want follow=1 from the record's last sequence (3)", ev)
	}
	if got := f.state("s1"); got != client.StateDeleted {
		t.Errorf("state %s after rm", got)
	}
}

func TestRmRefusesARunningSandboxUnlessForced(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "r1"})
	f.add(client.Sandbox{ID: "p2", State: client.StatePending})

	for _, id := range []string{"r1", "p2"} {
		r := f.run("rm", id)
		want := "airlock: sandbox " + id + " is running: stop it first (airlock stop " + id + ") or use rm -f\n"
		if r.code != ExitFailure || r.stderr != want || r.stdout != "" {
			t.Errorf("rm %s: exit %d, stdout %q, stderr %q; want 1 and %q", id, r.code, r.stdout, r.stderr, want)
		}
	}
	if d := f.requests("DELETE /v1/sandboxes/r1", "DELETE /v1/sandboxes/p2"); len(d) != 0 {
		t.Errorf("a refused rm deleted: %v", d)
	}

	for _, flag := range []string{"-f", "--force"} {
		id := map[string]string{"-f": "r1", "--force": "p2"}[flag]
		r := f.run("rm", flag, id)
		if r.code != 0 || r.stdout != "removed "+id+"\n" {
			t.Errorf("rm %s %s: exit %d, stdout %q, stderr %q", flag, id, r.code, r.stdout, r.stderr)
		}
		if len(f.requests("DELETE /v1/sandboxes/"+id)) != 1 {
			t.Errorf("rm %s %s sent no DELETE:\n%s", flag, id, f.requestList())
		}
	}
}

func TestRmQuiet(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "s1", State: client.StateFailed})
	r := f.run("-q", "rm", "s1")
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Errorf("rm -q: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if f.state("s1") != client.StateDeleted {
		t.Errorf("rm -q did not remove the sandbox: %s", f.state("s1"))
	}
}

func TestRmErrorsNameTheSandbox(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "gone", State: client.StateStopped})
	f.emit("gone", client.Event{Kind: "sandbox.deleted", State: client.StateDeleted})
	f.add(client.Sandbox{ID: "busy", State: client.StateStopped})
	f.fail("DELETE", "/v1/sandboxes/busy", &client.Error{Reason: client.ReasonInvalidState, Message: "sandbox busy is starting"})
	f.add(client.Sandbox{ID: "broken", State: client.StateStopped})
	f.fail("DELETE", "/v1/sandboxes/broken", &client.Error{Reason: client.ReasonEngine, Message: "cannot remove sandbox broken: the Engine went away"})

	f.assertFailures([]cliFailure{
		{[]string{"rm", "nosuch"}, ExitFailure, "airlock: sandbox nosuch not found\n"},
		{[]string{"rm", "gone"}, ExitFailure, "airlock: sandbox gone was deleted\n"},
		{[]string{"rm", "busy"}, ExitFailure, "airlock: sandbox busy is starting\n"},
		{[]string{"rm", "broken"}, ExitAirlock, "airlock: cannot remove sandbox broken: the Engine went away\n"},
	})
}

func TestRmByLabel(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "a1", State: client.StateStopped, Labels: map[string]string{"ci": "1"}})
	f.add(client.Sandbox{ID: "b2", State: client.StateStopped, Labels: map[string]string{"ci": "2"}})
	f.add(client.Sandbox{ID: "c3", State: client.StateStopped, Labels: map[string]string{"ci": "1"}})

	r := f.run("rm", "--label", "ci=1")
	if r.code != 0 || r.stdout != "removed a1\nremoved c3\n" {
		t.Fatalf("rm --label ci=1: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if f.state("b2") != client.StateStopped {
		t.Errorf("rm --label ci=1 touched b2")
	}
	if got := f.requests("GET /v1/sandboxes")[0].Query["label"]; len(got) != 1 || got[0] != "ci=1" {
		t.Errorf("label filter sent: %q", got)
	}

	// No match: nothing to do, and not an error.
	r = f.run("rm", "--label", "ci=9")
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Errorf("rm --label with no match: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// rm stops at the first sandbox it cannot remove: the ones after it stay.
func TestRmByLabelStopsAtTheFirstError(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "a1", State: client.StateStopped, Labels: map[string]string{"ci": "1"}})
	f.add(client.Sandbox{ID: "b2", Labels: map[string]string{"ci": "1"}})
	f.add(client.Sandbox{ID: "c3", State: client.StateStopped, Labels: map[string]string{"ci": "1"}})
	r := f.run("rm", "--label", "ci=1")
	if r.code != ExitFailure || r.stdout != "removed a1\n" || !strings.Contains(r.stderr, "sandbox b2 is running") {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if f.state("c3") != client.StateStopped {
		t.Errorf("c3 removed after the error")
	}
}

func TestRmProjectSandbox(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	file, dir := projectFile(t)

	r := f.run("--file", file, "rm")
	if r.code != ExitFailure || r.stderr != "airlock: no sandbox for the project "+dir+" (start one with `airlock up`)\n" {
		t.Errorf("rm with no project sandbox: exit %d, stderr %q", r.code, r.stderr)
	}

	f.add(client.Sandbox{ID: "other", State: client.StateStopped, Project: "/elsewhere"})
	f.add(client.Sandbox{ID: "job", State: client.StateStopped, Kind: "run", Project: dir})
	f.add(client.Sandbox{ID: "mine", State: client.StateStopped, Kind: "up", Project: dir})
	r = f.run("--file", file, "rm")
	if r.code != 0 || r.stdout != "removed mine\n" {
		t.Errorf("rm of the project's up sandbox: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestRmUsage(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "a1", State: client.StateStopped})
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"rm", "a1", "b2"}, "accepts at most 1 arg(s), received 2"},
		{[]string{"rm", "a1", "--label", "k=v"}, "give a sandbox or --label, not both"},
		{[]string{"rm", "--label", "novalue"}, `invalid --label "novalue"`},
		{[]string{"rm", "--bogus"}, "unknown flag: --bogus"},
	} {
		r := f.run(c.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.stderr) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.stderr)
		}
	}
	if len(f.requests("DELETE /v1/sandboxes/a1")) != 0 || f.state("a1") != client.StateStopped {
		t.Errorf("a usage error deleted:\n%s", f.requestList())
	}
}
