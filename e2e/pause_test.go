package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// TestPauseCLI: `airlock pause` freezes the project's sandbox (ps lists it
// paused, exec is refused saying how to go on), a second pause is no error,
// `airlock resume` (unpause's other name) lets it go on, rm refuses a paused
// sandbox without -f, stop stops it, and unpause of a stopped one is refused.
func TestPauseCLI(t *testing.T) {
	limit(t)
	e := newEnv(t, byIDManifest)
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	state := func() string {
		t.Helper()
		var list []client.Sandbox
		r := e.MustRun("ps", "--json")
		if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil || len(list) != 1 {
			t.Fatalf("ps --json: %v\n%s", err, r)
		}
		return list[0].State
	}
	if r := e.MustRun("pause"); strings.TrimSpace(r.Stdout) != "paused "+id {
		t.Errorf("pause printed %q, want %q", r.Stdout, "paused "+id)
	}
	if got := state(); got != client.StatePaused {
		t.Fatalf("ps after a pause: %s", got)
	}
	if r := e.MustRun("ps"); !strings.Contains(r.Stdout, "paused") {
		t.Errorf("ps does not show the paused sandbox:\n%s", r.Stdout)
	}
	if r := e.Run("exec", "--", "true"); r.Code != 1 || !strings.Contains(r.Stderr, "paused") || !strings.Contains(r.Stderr, "airlock unpause "+id) {
		t.Errorf("exec in a paused sandbox: want exit 1 saying it is paused and how to unpause it, got %s", r)
	}
	e.MustRun("pause", id)
	if r := e.Run("rm", id); r.Code != 1 || !strings.Contains(r.Stderr, "paused") {
		t.Errorf("rm of a paused sandbox: want exit 1 saying it is paused, got %s", r)
	}
	if r := e.MustRun("resume", id); strings.TrimSpace(r.Stdout) != "unpaused "+id {
		t.Errorf("resume printed %q, want %q", r.Stdout, "unpaused "+id)
	}
	if got := state(); got != client.StateReady {
		t.Fatalf("ps after an unpause: %s", got)
	}
	if r := e.MustRun("exec", "--", "echo", "goes-on"); strings.TrimSpace(r.Stdout) != "goes-on" {
		t.Errorf("exec after the unpause printed %q", r.Stdout)
	}
	e.MustRun("pause")
	e.MustRun("stop")
	if r := e.Run("unpause"); r.Code != 1 || !strings.Contains(r.Stderr, "cannot unpause sandbox "+id+": it is stopped") {
		t.Errorf("unpause of a stopped sandbox: want exit 1 saying it is stopped, got %s", r)
	}
	e.MustRun("rm", id)

	// --on-idle pause: paused once idle, not deleted.
	if r := e.Run("up", "-d", "--timeout", "1h", "--on-timeout", "pause"); r.Code != 2 {
		t.Errorf("--on-timeout pause: want exit 2, got %s", r)
	}
	id = strings.TrimSpace(e.MustRun("up", "-d", "--idle-timeout", "2s", "--on-idle", "pause").Stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sb, ev, err := e.daemonAPI().WaitState(ctx, id, client.StatePaused, client.StateStopped, client.StateDeleted)
	if err != nil || sb.State != client.StatePaused || ev.Reason != "idle_timeout" {
		t.Fatalf("up -d --idle-timeout 2s --on-idle pause: %v, %+v (%s)", err, sb, ev.Reason)
	}
	e.MustRun("rm", "-f", id)
}
