package control_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestUpgrade: a CLI of another build replaces the daemon without stopping a
// ready sandbox, which the new daemon adopts.
func TestUpgrade(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	ctx := ctxT(t, 2*time.Minute)
	sb := e.createReady(ctx, d.client, "")
	id, last := sb.ID, sb.LastSeq
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
	if want := "daemon outdated (build " + buildA + " -> " + buildB + "), restarting...\n"; r.Code != 0 || !strings.Contains(r.Stderr, want) {
		t.Errorf("airlock ps of build B: want %q on stderr\n%s", want, r)
	}
	if !strings.Contains(r.Stdout, id[:8]) && !strings.Contains(r.Stdout, id) {
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
	if strings.Contains(r.Stderr, "outdated") {
		t.Errorf("a second airlock ps restarted the daemon again:\n%s", r)
	}
	if _, err := d.client.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, d.client, id, 30*time.Second, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}
