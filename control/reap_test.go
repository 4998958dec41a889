package control_test

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestReaper: a run sandbox whose CLI is gone is removed within 10 s (cli_gone),
// one whose CLI lives is left alone; an up sandbox with no client is stopped
// after idle_ttl, an attached one is not; retention purges a deleted
// sandbox's history but keeps its ID reserved.
func TestReaper(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeUserConfig("[runtime]\nidle_ttl = \"2s\"\nevent_retention_ttl = \"1s\"\n")
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 3*time.Minute)

	cli := exec.Command("sleep", "300")
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Process.Kill(); _ = cli.Wait() })
	wm, secrets := e.wire()
	runReq := func(pid int, start string) *client.CreateRequest {
		return &client.CreateRequest{Kind: "run", Manifest: wm, Secrets: secrets, Start: true,
			Command: []string{"sleep", "300"}, CLIPid: pid, CLIStart: start}
	}
	gone, err := c.Create(ctx, runReq(cli.Process.Pid, procStart(t, cli.Process.Pid)))
	if err != nil {
		t.Fatal(err)
	}
	alive, err := c.Create(ctx, runReq(os.Getpid(), procStart(t, os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	// A reused pid (same pid, another start time) is not the CLI.
	reused, err := c.Create(ctx, runReq(os.Getpid(), "1"))
	if err != nil {
		t.Fatal(err)
	}
	idle, err := c.Create(ctx, e.upRequest(""))
	if err != nil {
		t.Fatal(err)
	}
	held, err := c.Create(ctx, e.upRequest(""))
	if err != nil {
		t.Fatal(err)
	}
	release, err := c.Attach(ctx, held.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{gone.ID, alive.ID, idle.ID, held.ID} {
		waitState(t, c, id, 60*time.Second, client.StateReady)
	}

	killed := time.Now()
	_ = cli.Process.Kill()
	_ = cli.Wait()
	_, ev := waitState(t, c, gone.ID, 20*time.Second, client.StateDeleted)
	if took := time.Since(killed); took > 10*time.Second {
		t.Errorf("the run sandbox of a gone CLI was removed after %v, want within 10 s", took)
	}
	if ev.Reason != "cli_gone" && ev.Kind != "" {
		t.Errorf("sandbox.deleted of a gone CLI has reason %q, want cli_gone", ev.Reason)
	}
	if evs := allEvents(t, c, gone.ID); evs[len(evs)-1].Kind != "sandbox.deleted" || evs[len(evs)-1].Reason != "cli_gone" {
		t.Errorf("the last event of a gone CLI's sandbox: %+v", evs[len(evs)-1])
	}
	testenv.AssertNoLeftovers(t, e.docker, "dev.airlock.sandbox", gone.ID)
	waitState(t, c, reused.ID, 20*time.Second, client.StateDeleted)

	// idle_ttl: the unattached up sandbox stops; the attached one stays.
	// (It may have stopped before the wait began: then the wait returns no event,
	// and the reason is read from the history.)
	sb, _ := waitState(t, c, idle.ID, 20*time.Second, client.StateStopped, client.StateFailed)
	if ev := lastEvent(t, c, idle.ID, "sandbox.stopped"); sb.State != client.StateStopped || ev.Reason != "idle_ttl" {
		t.Errorf("an idle up sandbox: %s (%q), want stopped with reason idle_ttl", sb.State, ev.Reason)
	}
	if got, _ := c.Get(ctx, held.ID); got.State != client.StateReady {
		t.Errorf("an attached up sandbox is %s, want ready", got.State)
	}
	if got, _ := c.Get(ctx, alive.ID); got.State != client.StateReady {
		t.Errorf("the run sandbox of a live CLI is %s, want ready", got.State)
	}
	release()
	sb, _ = waitState(t, c, held.ID, 20*time.Second, client.StateStopped, client.StateFailed)
	if ev := lastEvent(t, c, held.ID, "sandbox.stopped"); sb.State != client.StateStopped || ev.Reason != "idle_ttl" {
		t.Errorf("an up sandbox after its client detached: %s (%q), want stopped with reason idle_ttl", sb.State, ev.Reason)
	}
	if got, _ := c.Get(ctx, alive.ID); got.State != client.StateReady {
		t.Errorf("the run sandbox of a live CLI is %s after several reaper rounds, want ready", got.State)
	}

	// Retention: the deleted sandbox's history is purged (at the next start, as
	// event_retention_ttl is short), its ID stays refused.
	evs := allEvents(t, c, gone.ID)
	if wait := time.Until(evs[len(evs)-1].Time.Add(1100 * time.Millisecond)); wait > 0 {
		time.Sleep(wait) // the retention clock itself
	}
	d.stop(t, syscall.SIGTERM)
	d = e.startDaemon(binA)
	c = d.client
	if _, err := c.Get(ctx, gone.ID); apiReason(err) != client.ReasonSandboxNotFound {
		t.Errorf("a purged sandbox: %v, want sandbox_not_found\n%s", err, d.out)
	}
	if _, err := c.Events(ctx, gone.ID, 0, false); apiReason(err) != client.ReasonSandboxNotFound {
		t.Errorf("the events of a purged sandbox: %v, want sandbox_not_found", err)
	}
	req := runReq(os.Getpid(), procStart(t, os.Getpid()))
	req.ID = gone.ID
	if _, err := c.Create(ctx, req); apiReason(err) != client.ReasonIDAlreadyUsed {
		t.Errorf("create with a purged sandbox's ID: %v, want id_already_used", err)
	}
	for _, id := range []string{alive.ID, idle.ID, held.ID} {
		if _, err := c.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		waitState(t, c, id, 30*time.Second, client.StateDeleted)
	}
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// lastEvent is the last event of kind in a sandbox's history (zero when none).
func lastEvent(t *testing.T, c *client.Client, id, kind string) client.Event {
	t.Helper()
	evs := allEvents(t, c, id)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == kind {
			return evs[i]
		}
	}
	return client.Event{}
}
