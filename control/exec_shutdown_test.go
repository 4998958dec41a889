package control_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// TestExecDoesNotBlockShutdown: an API exec that runs on does not hold the daemon
// at SIGTERM (an upgrade would SIGKILL it after 5 s and record nothing); how the
// exec ended is recorded.
func TestExecDoesNotBlockShutdown(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeManifest(`
[sandbox]
image = "{{image}}"
`)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 2*time.Minute)
	sb := e.createReady(ctx, c, uniq("execstop"))
	ex, err := c.Exec(ctx, sb.ID, &client.ExecRequest{Cmd: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the exec to start", func() bool {
		return indexOf(allEvents(t, c, sb.ID), "exec.started") >= 0
	})
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(4 * time.Second):
		t.Fatal("the daemon is still running 4 s after SIGTERM: an exec holds its shutdown")
	}
	d = e.startDaemon(binA)
	evs := allEvents(t, d.client, sb.ID)
	found := false
	for _, ev := range evs {
		if ev.Kind == "exec.finished" && ev.ExecID == ex.ID && strings.Contains(ev.Reason, "daemon_stopped") {
			found = true
		}
	}
	if !found {
		t.Errorf("no exec.finished recording that the daemon stopped:\n%s", dumpEvents(d.client, sb.ID))
	}
	if _, err := d.client.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, d.client, sb.ID, time.Minute, "deleted")
}
