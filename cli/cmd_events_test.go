package cli

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/client"
)

// clock is an event's time as events prints it.
func clock(ev client.Event) string { return ev.Time.Local().Format("15:04:05.000") }

// eventsSandbox adds s1 with a history of seven events that use every detail.
func eventsSandbox(t *testing.T, f *fakeDaemon) []client.Event {
	t.Helper()
	f.add(client.Sandbox{ID: "s1"})
	code, delay := 3, int64(500)
	f.emit("s1", client.Event{Kind: "daemon.started", Daemon: "web", PID: 42})
	f.emit("s1", client.Event{Kind: "daemon.exited", Daemon: "web", PID: 42, ExitCode: &code, Signal: "SIGTERM"})
	f.emit("s1", client.Event{Kind: "daemon.backoff", Daemon: "web", Attempt: 2, DelayMS: &delay, Reason: "crashed"})
	f.emit("s1", client.Event{Kind: "service.ready", Service: "db", Extra: map[string]string{"port": "5432"}})
	f.emit("s1", client.Event{Kind: "exec.finished", ExecID: "e1", ExitCode: new(int)})
	return f.history("s1")
}

func TestEventsLines(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	h := eventsSandbox(t, f)
	r := f.run("events", "s1")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	want := []string{
		"   1  " + clock(h[0]) + "  sandbox.created    pending  ",
		"   2  " + clock(h[1]) + "  sandbox.ready      ready    ",
		"   3  " + clock(h[2]) + "  daemon.started     ready    daemon=web pid=42",
		"   4  " + clock(h[3]) + "  daemon.exited      ready    daemon=web pid=42 exit_code=3 signal=SIGTERM",
		"   5  " + clock(h[4]) + "  daemon.backoff     ready    daemon=web attempt=2 delay_ms=500 reason=crashed",
		"   6  " + clock(h[5]) + "  service.ready      ready    service=db",
		"   7  " + clock(h[6]) + "  exec.finished      ready    exec=e1 exit_code=0",
	}
	if got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events s1:\n%s\nwant:\n%s", r.stdout, strings.Join(want, "\n"))
	}
	ev := f.requests("GET /v1/sandboxes/s1/events")
	if len(ev) != 1 || ev[0].Query.Get("from") != "0" || ev[0].Query.Has("follow") {
		t.Errorf("events asked with %v, want from=0 without follow", ev)
	}
}

func TestEventsFrom(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	eventsSandbox(t, f)
	r := f.run("events", "--from", "5", "s1")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "   6  ") || !strings.HasPrefix(lines[1], "   7  ") {
		t.Errorf("events --from 5: exit %d, stdout:\n%s", r.code, r.stdout)
	}
	if q := f.requests("GET /v1/sandboxes/s1/events")[0].Query.Get("from"); q != "5" {
		t.Errorf("from=%s sent, want 5", q)
	}
	// After the last event: nothing, and not an error.
	if r := f.run("events", "--from", "7", "s1"); r.code != 0 || r.stdout != "" {
		t.Errorf("events --from 7: exit %d, stdout %q", r.code, r.stdout)
	}
}

func TestEventsJSON(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	h := eventsSandbox(t, f)
	r := f.run("events", "--json", "s1")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != len(h) {
		t.Fatalf("events --json printed %d lines, want %d:\n%s", len(lines), len(h), r.stdout)
	}
	for i, line := range lines {
		var ev client.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %d is no JSON event: %v\n%s", i+1, err, line)
		}
		if !ev.Time.Equal(h[i].Time) {
			t.Errorf("line %d: time %s, want %s", i+1, ev.Time, h[i].Time)
		}
		ev.Time = h[i].Time
		if !reflect.DeepEqual(ev, h[i]) {
			t.Errorf("line %d: %+v, want %+v", i+1, ev, h[i])
		}
	}
	// The documented keys: sandbox_id, sequence, kind, time, state and the details.
	for _, k := range []string{`"sandbox_id":"s1"`, `"sequence":4`, `"kind":"daemon.exited"`, `"time":`, `"state":"ready"`, `"exit_code":3`, `"delay_ms":500`, `"extra":{"port":"5432"}`} {
		if !strings.Contains(r.stdout, k) {
			t.Errorf("events --json has no %s:\n%s", k, r.stdout)
		}
	}
}

// -f prints the history, then each new event as it happens, with no gap or
// duplicate, until the stream ends.
func TestEventsFollow(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "s1"})
	run := f.start("events", "-f", "--json", "--from", "1", "s1")
	run.stdout.WaitFor(t, `"sequence":2`, waitTimeout)
	f.emit("s1", client.Event{Kind: "daemon.started", Daemon: "web", PID: 7})
	run.stdout.WaitFor(t, `"sequence":3`, waitTimeout)
	f.emit("s1", client.Event{Kind: "sandbox.stopped", State: client.StateStopped})
	run.stdout.WaitFor(t, `"sequence":4`, waitTimeout)
	f.endEvents("s1")
	r := run.wait(t)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("events -f: exit %d, stderr %q", r.code, r.stderr)
	}
	var seqs []uint64
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		var ev client.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ev.Sequence)
	}
	if !reflect.DeepEqual(seqs, []uint64{2, 3, 4}) {
		t.Errorf("events -f --from 1 printed sequences %v, want [2 3 4]", seqs)
	}
	q := f.requests("GET /v1/sandboxes/s1/events")[0].Query
	if q.Get("follow") != "1" || q.Get("from") != "1" {
		t.Errorf("events -f asked with %v", q)
	}
}

// A stream the daemon ends with stream.error (the client fell behind) is an error.
func TestEventsStreamError(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "s1"})
	f.emit("s1", client.Event{Kind: "stream.error", Reason: "the subscriber fell behind"})
	r := f.run("events", "s1")
	lines := strings.Split(r.stdout, "\n")
	if r.code != ExitFailure || len(lines) != 3 || r.stderr != "airlock: the event stream ended: the subscriber fell behind\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// Without SANDBOX, this project's; a deleted sandbox's history is still there.
func TestEventsTargets(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	file, dir := projectFile(t)
	f.add(client.Sandbox{ID: "mine", Project: dir})
	f.add(client.Sandbox{ID: "gone", State: client.StateStopped})
	f.emit("gone", client.Event{Kind: "sandbox.deleted", State: client.StateDeleted})

	r := f.run("--file", file, "events")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, "sandbox.ready") {
		t.Errorf("events of the project's sandbox: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if len(f.requests("GET /v1/sandboxes/mine/events")) != 1 {
		t.Errorf("no events request for the project's sandbox:\n%s", f.requestList())
	}
	r = f.run("events", "gone")
	if r.code != 0 || !strings.Contains(r.stdout, "sandbox.deleted    deleted") {
		t.Errorf("events of a deleted sandbox: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestEventsErrors(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "s1"})
	file, dir := projectFile(t)
	f.assertFailures([]cliFailure{
		{[]string{"events", "nosuch"}, ExitFailure, "airlock: sandbox nosuch not found\n"},
		{[]string{"--file", file, "events"}, ExitFailure, "airlock: no sandbox for the project " + dir + " (start one with `airlock up`)\n"},
		{[]string{"events", "--from", "-1", "s1"}, ExitUsage, `airlock: invalid argument "-1" for "--from" flag`},
		{[]string{"events", "a", "b"}, ExitUsage, "airlock: accepts at most 1 arg(s), received 2\n"},
	})
	f.fail("GET", "/v1/sandboxes/s1/events", &client.Error{Reason: client.ReasonBadCursor, Message: "from must be a sequence number"})
	if r := f.run("events", "s1"); r.code != ExitUsage || r.stderr != "airlock: from must be a sequence number\n" {
		t.Errorf("bad cursor: exit %d, stderr %q", r.code, r.stderr)
	}
}
