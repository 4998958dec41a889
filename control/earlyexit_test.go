package control_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/daemonfiles"
	"github.com/airlock-dev/airlock/test/testenv"
)

// brokenSupervisor is a Linux binary for this host that cannot run in the busybox
// image: a dynamically linked one (/bin/true), whose loader the image lacks, so
// the primary container dies at once with `exec /airlock/bin/airlock: no such
// file or directory` before its supervisor reported anything.
func brokenSupervisor(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "airlock")
	testenv.CopyFile(t, "/bin/true", bin, 0o755)
	if err := docker.CheckLinuxBinary(bin, runtime.GOARCH, true); err == nil {
		t.Fatalf("/bin/true is statically linked here; the test needs a dynamically linked binary")
	}
	return bin
}

// TestPrimaryDiesBeforeReady: a sandbox whose primary container dies while it is
// pending (its supervisor cannot even be executed) becomes failed with the
// container's reason, never stays pending; starting it again fails the same way;
// a stop of a pending sandbox ends it too; removing them leaves nothing.
func TestPrimaryDiesBeforeReady(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	ctx := ctxT(t, 3*time.Minute)
	owner := randHex(16)
	rt := &docker.Runtime{Engine: e.docker, Paths: e.paths, Quiet: true, Binary: brokenSupervisor(t), BuildID: buildA, Getenv: e.getenv, Owner: owner}
	c := startInProcess(t, e, rt)
	t.Cleanup(func() {
		for _, v := range ownedVolumes(t, e, owner) {
			_ = e.docker.VolumeRemove(context.Background(), v, true)
		}
	})

	sb, err := c.Create(ctx, e.upRequest(""))
	if err != nil {
		t.Fatal(err)
	}
	id := sb.ID
	got, ev := waitState(t, c, id, time.Minute, client.StateFailed, client.StateReady, client.StateStopped)
	if got.State != client.StateFailed {
		t.Fatalf("sandbox %s is %s, want failed\nevents:\n%s", id, got.State, dumpEvents(c, id))
	}
	for _, want := range []string{"exited", "no such file or directory"} {
		if !strings.Contains(ev.Reason, want) {
			t.Errorf("sandbox.failed reason %q lacks %q", ev.Reason, want)
		}
	}
	t.Logf("reason: %s", ev.Reason)
	if ev.Extra["exit_code"] != "125" || ev.Extra["exited_early"] == "" {
		t.Errorf("sandbox.failed extra = %v, want exit_code 125 and exited_early", ev.Extra)
	}

	// Started again (airlock up of the failed sandbox), it fails again.
	rs, err := c.Resume(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev = waitNext(t, c, id, rs.LastSeq, "sandbox.failed")
	if !strings.Contains(ev.Reason, "no such file or directory") {
		t.Errorf("sandbox.failed reason after a resume: %q", ev.Reason)
	}

	// A pending sandbox (created, not started) that is stopped ends failed.
	req := e.upRequest("")
	req.Start = false
	sb2, err := c.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	waitNext2 := func() client.Event {
		ev, err := c.WaitEvent(ctx, sb2.ID, 0, "sandbox.created", "sandbox.failed")
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	if ev := waitNext2(); ev.Kind != "sandbox.created" {
		t.Fatalf("second sandbox: %s (%s)", ev.Kind, ev.Reason)
	}
	if _, err := c.Stop(ctx, sb2.ID); err != nil {
		t.Fatal(err)
	}
	got, ev = waitState(t, c, sb2.ID, time.Minute, client.StateFailed, client.StateStopped)
	if got.State != client.StateFailed || !strings.Contains(ev.Reason, "before it was ready") {
		t.Errorf("a stopped pending sandbox is %s (%q), want failed, stopped before it was ready", got.State, ev.Reason)
	}

	for _, id := range []string{id, sb2.ID} {
		if _, err := c.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		waitState(t, c, id, time.Minute, client.StateDeleted)
	}
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
	if b, err := os.ReadFile(daemonfiles.LogFile(e.paths)); err == nil && strings.Contains(string(b), "cannot go from") {
		t.Errorf("the daemon tried a transition the store refuses:\n%s", b)
	}
}
