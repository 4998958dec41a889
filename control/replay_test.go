package control_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/supervisor"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestStatusReplayAfterRestart: transitions a sandbox's supervisor reports while
// no daemon runs are recorded once the daemon is back, and lines recorded before
// the crash are not recorded twice.
func TestStatusReplayAfterRestart(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	flag := filepath.Join(e.project, "crash-now")
	e.writeManifest(`
[sandbox]
image = "{{image}}"

[daemons.worker]
command = ["sh", "-c", "while [ ! -e ` + flag + ` ]; do sleep 0.05; done; rm -f ` + flag + `; exit 3"]
restart = "on-failure"
max_restarts = 1
`)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 2*time.Minute)
	ready := e.createReady(ctx, c, uniq("replay"))
	d.stop(t, syscall.SIGKILL)

	// While no daemon runs, the worker exits with 3 and is restarted.
	if err := os.WriteFile(flag, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	// The status stream lives in the sandbox: read it through the Engine.
	eventually(t, 30*time.Second, "the supervisor to restart the worker", func() bool {
		b := testenv.ReadContainerFile(ctx, e.docker, "airlock-"+ready.ID, supervisor.StatusFile)
		return countSubstr(b, `"daemon.started"`) >= 2
	})

	d = e.startDaemon(binA)
	c = d.client
	// The restart's lines (daemon.restarting, then the second daemon.started)
	// are recorded one after the other: wait for the last of them.
	eventually(t, 30*time.Second, "the worker's restart to be recorded", func() bool {
		evs := allEvents(t, c, ready.ID)
		started := 0
		for _, ev := range evs {
			if ev.Kind == "daemon.started" {
				started++
			}
		}
		return indexOf(evs, "daemon.restarting") >= 0 && started >= 2
	})
	evs := allEvents(t, c, ready.ID)
	if evs[len(evs)-1].Sequence <= ready.LastSeq {
		t.Fatalf("no event after the restart:\n%s", dumpEvents(c, ready.ID))
	}
	assertContiguous(t, "events", evs, 0)
	counts := map[string]int{}
	for _, ev := range evs {
		counts[ev.Kind]++
	}
	if counts["sandbox.ready"] != 1 || counts["daemon.exited"] != 1 || counts["daemon.started"] != 2 {
		t.Fatalf("want one sandbox.ready, one daemon.exited and two daemon.started, got %v:\n%s", counts, dumpEvents(c, ready.ID))
	}
	if _, err := c.Delete(ctx, ready.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, ready.ID, time.Minute, "deleted")
}

func countSubstr(s, sub string) int {
	n := 0
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			n++
		}
	}
	return n
}
