package control_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// TestRecovery: a crashed daemon (SIGKILL) restarts and reconciles the store with
// Docker: running stays ready with its sequence continuing, a removed or exited
// container fails the sandbox, pending fails, deleting finishes.
func TestRecovery(t *testing.T) {
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 3*time.Minute)
	ids := map[string]string{}
	for _, name := range []string{"running", "removed", "exited", "deleting"} {
		sb, err := c.Create(ctx, e.upRequest(uniq("rec-"+name)))
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = sb.ID
	}
	last := map[string]uint64{}
	for name, id := range ids {
		last[name] = waitReady(t, c, id).LastSeq
	}
	d.stop(t, syscall.SIGKILL)

	// Behind the daemon's back.
	if err := e.docker.ContainerRemove(ctx, "airlock-"+ids["removed"], container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.docker.ContainerKill(ctx, "airlock-"+ids["exited"], "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the killed container to exit", func() bool { return e.containerState(ids["exited"]) == "exited" })
	st, err := store.Open(e.paths.Store())
	if err != nil {
		t.Fatalf("cannot open the store of the crashed daemon: %v", err)
	}
	plan, _ := json.Marshal(map[string]any{})
	pending, _, err := st.CreateSandbox(store.Sandbox{ID: uniq("rec-pending"), Kind: "up", Project: e.project, Plan: plan}, store.Event{})
	if err != nil {
		t.Fatal(err)
	}
	ids["pending"] = pending.ID
	if _, err := st.Append(ids["deleting"], store.Event{Kind: "sandbox.deleting"}, store.StateDeleting); err != nil {
		t.Fatal(err)
	}
	last["deleting"]++
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	d = e.startDaemon(binA)
	c = d.client
	// running: still ready, nothing recorded by the recovery itself.
	sb, err := c.Get(ctx, ids["running"])
	if err != nil || sb.State != client.StateReady || sb.LastSeq != last["running"] {
		t.Errorf("the running sandbox after recovery: %+v %v, want ready at sequence %d", sb, err, last["running"])
	}
	// removed: failed with a reason.
	// Recovery is done before the daemon answers: no waiting.
	sb, err = c.Get(ctx, ids["removed"])
	if err != nil || sb.State != client.StateFailed || !strings.Contains(sb.Reason, "missing") {
		t.Errorf("a sandbox whose container was removed: %+v %v, want failed, container missing", sb, err)
	}
	// exited: failed.
	sb, err = c.Get(ctx, ids["exited"])
	if err != nil || sb.State != client.StateFailed || !strings.Contains(sb.Reason, "exited") {
		t.Errorf("a sandbox whose container exited: %+v %v, want failed", sb, err)
	}
	// pending: failed.
	sb, err = c.Get(ctx, ids["pending"])
	if err != nil || sb.State != client.StateFailed || sb.Reason == "" {
		t.Errorf("a pending sandbox after recovery: %+v %v, want failed with a reason", sb, err)
	}
	// deleting: finished.
	waitState(t, c, ids["deleting"], 30*time.Second, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, "dev.airlock.sandbox", ids["deleting"])

	for name, id := range ids {
		if name == "pending" {
			continue
		}
		evs := allEvents(t, c, id)
		assertContiguous(t, name, evs, 0)
		if n := uint64(len(evs)); n < last[name] {
			t.Errorf("%s: history shrank from %d to %d events", name, last[name], n)
		}
	}

	// The running sandbox's sequence continues and it still works.
	ex, err := c.Exec(ctx, ids["running"], &client.ExecRequest{Cmd: []string{"echo", "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.WaitExec(ctx, ids["running"], ex.ID); err != nil || got.ExitCode == nil || *got.ExitCode != 0 {
		t.Errorf("exec after recovery: %+v %v", got, err)
	}
	evs := allEvents(t, c, ids["running"])
	assertContiguous(t, "running", evs, 0)
	if len(evs) <= int(last["running"]) || evs[last["running"]].Kind != "exec.started" {
		t.Errorf("the first event after recovery is not the exec's at %d: %v", last["running"]+1, kinds(evs))
	}
	if _, err := c.Stop(ctx, ids["running"]); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, ids["running"], 30*time.Second, client.StateStopped)

	// A failed sandbox can be deleted; everything goes.
	for _, name := range []string{"running", "removed", "exited", "pending"} {
		if _, err := c.Delete(ctx, ids[name]); err != nil {
			t.Errorf("delete %s: %v", name, err)
			continue
		}
		waitState(t, c, ids[name], 30*time.Second, client.StateDeleted)
	}
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// TestRecoveryAfterSIGTERM: an orderly restart keeps a ready sandbox ready and
// records nothing for it; a sandbox stopped meanwhile is found exited.
func TestRecoveryAfterSIGTERM(t *testing.T) {
	e := newEnv(t)
	d := e.startDaemon(binA)
	ctx := ctxT(t, 2*time.Minute)
	sb, err := d.client.Create(ctx, e.upRequest(""))
	if err != nil {
		t.Fatal(err)
	}
	id := sb.ID
	last := waitReady(t, d.client, id).LastSeq
	d.stop(t, syscall.SIGTERM)
	if s := e.containerState(id); s != "running" {
		t.Fatalf("the sandbox is %q after the daemon stopped, want running (sandboxes outlive the daemon)", s)
	}
	d = e.startDaemon(binA)
	if got, err := d.client.Get(ctx, id); err != nil || got.State != client.StateReady || got.LastSeq != last {
		t.Errorf("after an orderly restart: %+v %v, want ready at %d", got, err, last)
	}
	// The new daemon watches the Engine: a kill is recorded.
	if err := e.docker.ContainerKill(ctx, "airlock-"+id, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	ev := waitNext(t, d.client, id, last, "sandbox.stopped")
	if ev.Sequence <= last {
		t.Errorf("sequence went back: %d after %d", ev.Sequence, last)
	}
	assertContiguous(t, "history", allEvents(t, d.client, id), 0)
	if _, err := d.client.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, d.client, id, 30*time.Second, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// TestEngineEvents: a primary killed behind the daemon's back is recorded as
// stopped with its exit code; a resumed sandbox is ready again; an OOM kill of
// a run sandbox's main command fails it with reason oom_killed.
func TestEngineEvents(t *testing.T) {
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 2*time.Minute)
	sb, err := c.Create(ctx, e.upRequest(""))
	if err != nil {
		t.Fatal(err)
	}
	id := sb.ID
	last := waitReady(t, c, id).LastSeq
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

// TestReaper: a run sandbox whose CLI is gone is removed within 10 s (cli_gone),
// one whose CLI lives is left alone; an up sandbox with no client is stopped
// after idle_ttl, an attached one is not; retention purges a deleted
// sandbox's history but keeps its ID reserved.
func TestReaper(t *testing.T) {
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
	sb, ev := waitState(t, c, idle.ID, 20*time.Second, client.StateStopped, client.StateFailed)
	if sb.State != client.StateStopped || ev.Reason != "idle_ttl" {
		t.Errorf("an idle up sandbox: %s (%q), want stopped with reason idle_ttl", sb.State, ev.Reason)
	}
	if got, _ := c.Get(ctx, held.ID); got.State != client.StateReady {
		t.Errorf("an attached up sandbox is %s, want ready", got.State)
	}
	if got, _ := c.Get(ctx, alive.ID); got.State != client.StateReady {
		t.Errorf("the run sandbox of a live CLI is %s, want ready", got.State)
	}
	release()
	sb, ev = waitState(t, c, held.ID, 20*time.Second, client.StateStopped, client.StateFailed)
	if sb.State != client.StateStopped || ev.Reason != "idle_ttl" {
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

// TestUpgrade: a CLI of another build replaces the daemon without stopping a
// ready sandbox, which the new daemon adopts.
func TestUpgrade(t *testing.T) {
	e := newEnv(t)
	d := e.startDaemon(binA)
	ctx := ctxT(t, 2*time.Minute)
	sb, err := d.client.Create(ctx, e.upRequest(""))
	if err != nil {
		t.Fatal(err)
	}
	id := sb.ID
	last := waitReady(t, d.client, id).LastSeq
	// The replacement daemon is started detached by the CLI: stop it at the end.
	t.Cleanup(func() {
		h, err := d.client.Health(context.Background())
		if err != nil || h.PID == d.pid {
			return
		}
		_ = syscall.Kill(h.PID, syscall.SIGTERM)
		deadline := time.Now().Add(10 * time.Second)
		for syscall.Kill(h.PID, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		_ = syscall.Kill(h.PID, syscall.SIGKILL)
	})
	r := e.run(binB, "ps")
	if want := "daemon outdated (build " + buildA + " -> " + buildB + "), restarting...\n"; r.code != 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("airlock ps of build B: want %q on stderr\n%s", want, r)
	}
	if !strings.Contains(r.stdout, id[:8]) && !strings.Contains(r.stdout, id) {
		t.Errorf("airlock ps does not list the sandbox %s:\n%s", id, r)
	}
	if _, ok := d.exited(10 * time.Second); !ok {
		t.Errorf("the daemon of build A still runs")
	}
	h, err := d.client.Health(ctx)
	if err != nil || h.BuildID != buildB || h.PID == d.pid {
		t.Fatalf("the daemon after the upgrade: %+v %v, want build %s", h, err, buildB)
	}
	got, err := d.client.Get(ctx, id)
	if err != nil || got.State != client.StateReady || got.LastSeq != last {
		t.Errorf("the sandbox after the upgrade: %+v %v, want ready at %d", got, err, last)
	}
	if s := e.containerState(id); s != "running" {
		t.Errorf("the primary is %q after the upgrade, want running", s)
	}
	// Adopted: the new daemon runs execs in it and records its death.
	ex, err := d.client.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := d.client.WaitExec(ctx, id, ex.ID); err != nil || got.ExitCode == nil || *got.ExitCode != 0 {
		t.Errorf("exec after the upgrade: %+v %v", got, err)
	}
	r = e.run(binB, "ps")
	if strings.Contains(r.stderr, "outdated") {
		t.Errorf("a second airlock ps restarted the daemon again:\n%s", r)
	}
	if _, err := d.client.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, d.client, id, 30*time.Second, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}
