package control_test

import (
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestEngineEvents: a primary killed behind the daemon's back is recorded as
// stopped with its exit code; a resumed sandbox is ready again; an OOM kill of
// a run sandbox's main command fails it with reason oom_killed.
func TestEngineEvents(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 2*time.Minute)
	sb := e.createReady(ctx, c, "")
	id, last := sb.ID, sb.LastSeq
	if err := e.docker.ContainerKill(ctx, "airlock-"+id, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	ev := waitNext(t, c, id, last, "sandbox.stopped")
	if ev.State != client.StateStopped || ev.ExitCode == nil || *ev.ExitCode != 137 || ev.Reason != "exited" {
		t.Errorf("after docker kill: %+v (exit code %v), want stopped, exited, 137", ev, ev.ExitCode)
	}
	rs, err := c.Resume(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitNext(t, c, id, rs.LastSeq, "sandbox.ready")
	assertContiguous(t, "history", allEvents(t, c, id), 0)
	if _, err := c.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, 30*time.Second, client.StateDeleted)

	// OOM: a run sandbox whose main command outgrows the memory limit.
	e.writeManifest(`
[sandbox]
image = "{{image}}"
network = "none"
memory = "32m"
`)
	wm, secrets := e.wire()
	sb, err = c.Create(ctx, &client.CreateRequest{Kind: "run", Manifest: wm, Secrets: secrets, Start: true,
		Command: []string{"sh", "-c", `x=$(head -c 400000000 /dev/zero | tr "\0" a); echo survived`}})
	if err != nil {
		t.Fatal(err)
	}
	sb, ev = waitState(t, c, sb.ID, 60*time.Second, client.StateFailed, client.StateStopped)
	if sb.State != client.StateFailed || ev.Reason != "oom_killed" {
		t.Errorf("an OOM-killed sandbox: %s (%q), want failed with reason oom_killed\n%s", sb.State, ev.Reason, dumpEvents(c, sb.ID))
	}
	if _, err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, sb.ID, 30*time.Second, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}
