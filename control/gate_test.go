package control_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// TestCreatesPerEngine: with runtime.creates_per_engine = 1, a sandbox asked
// for while another's start holds the Engine's one turn (its service takes 2 s
// to be healthy) waits for it, says so once it waited 1 s (sandbox.queued,
// naming the setting), and starts after it; both end ready.
func TestCreatesPerEngine(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeUserConfig("[runtime]\ncreates_per_engine = 1\n")
	e.writeManifest(`
[sandbox]
image = "{{image}}"

[services.slow]
image = "{{image}}"
command = ["sh", "-c", "sleep 2; touch /tmp/ok; exec sleep 300"]
healthcheck = { cmd = ["test", "-e", "/tmp/ok"], interval = "100ms", retries = 100 }
`)
	c := e.startDaemon(binA).client
	ctx := ctxT(t, 3*time.Minute)
	a, err := c.Create(ctx, e.upRequest(""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitEvent(ctx, a.ID, 0, "sandbox.created", "sandbox.failed"); err != nil {
		t.Fatal(err)
	}
	b, err := c.Create(ctx, e.upRequest(""))
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, a.ID)
	waitReady(t, c, b.ID)
	evA, evB := allEvents(t, c, a.ID), allEvents(t, c, b.ID)
	at := func(evs []client.Event, kind string) (client.Event, int) {
		i := slices.IndexFunc(evs, func(ev client.Event) bool { return ev.Kind == kind })
		if i < 0 {
			t.Fatalf("no %s in %v", kind, evs)
		}
		return evs[i], i
	}
	q, qi := at(evB, "sandbox.queued")
	if !strings.Contains(q.Reason, "waiting for the Engine") || !strings.Contains(q.Reason, "runtime.creates_per_engine") {
		t.Errorf("sandbox.queued reason: %q", q.Reason)
	}
	startedB, si := at(evB, "sandbox.started")
	startedA, _ := at(evA, "sandbox.started")
	if si < qi || startedB.Time.Before(startedA.Time) {
		t.Errorf("b queued at %d and started at %d (%v), a started at %v: want b queued, then started after a", qi, si, startedB.Time, startedA.Time)
	}
}
