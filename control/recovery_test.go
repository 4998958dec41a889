package control_test

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestRecovery: a crashed daemon (SIGKILL) restarts and reconciles the store with
// Docker: running stays ready with its sequence continuing, a removed or exited
// container fails the sandbox, pending fails, deleting finishes.
func TestRecovery(t *testing.T) {
	parallel(t)
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
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	ctx := ctxT(t, 2*time.Minute)
	sb := e.createReady(ctx, d.client, "")
	id, last := sb.ID, sb.LastSeq
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
