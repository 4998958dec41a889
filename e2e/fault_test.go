package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// TestRunSurvivesDaemonKill: the control daemon is killed (kill -9) while a run's
// main command runs; the CLI still returns the main command's code with its whole
// output, a daemon answers again, and the sandbox is removed, not left failed.
func TestRunSurvivesDaemonKill(t *testing.T) {
	limit(t)
	e := newEnv(t, plainManifest)
	flag := filepath.Join(e.Project, "go-on")
	p := e.Start("run", "--", "sh", "-c", "echo before; while [ ! -e "+flag+" ]; do sleep 0.05; done; echo after; exit 3")
	eventually(t, cmdTimeout, "the main command to run", func() bool { return strings.Contains(p.Stdout.String(), "before") })
	pid, alive := e.DaemonPID()
	if !alive {
		t.Fatalf("no control daemon runs (pid file %s)", e.PidFile())
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r, ok := p.Wait(time.Minute)
	if !ok {
		// What the daemons saw.
		_ = p.Cmd.Process.Kill()
		r, _ = p.Wait(10 * time.Second)
		b, _ := os.ReadFile(filepath.Join(e.Data, "airlock", "daemon", "airlockd.log"))
		t.Fatalf("the run did not end within 1 min: %s\ndaemon log:\n%s", r, b)
	}
	if r.Code != 3 || r.Stdout != "before\nafter\n" {
		t.Fatalf("run while its daemon was killed: want exit 3 and the whole output once, got %s", r)
	}
	e.assertClean()
	if ps := e.PS(); len(ps) != 0 {
		t.Errorf("ps -a after the run lists %+v", ps)
	}
}

// TestRunSurvivesDaemonKillInSetup: kill -9 of the control daemon just after
// the run's sandbox.accepted (its making under way), sandbox.created (not
// started) and sandbox.started events (each seen through the API): the CLI
// starts a daemon again, resumes its run (or makes it again, when nothing of it
// ran) and returns the main command's code with its whole output, once.
func TestRunSurvivesDaemonKillInSetup(t *testing.T) {
	for _, at := range []string{"sandbox.accepted", "sandbox.created", "sandbox.started"} {
		t.Run(at, func(t *testing.T) {
			limit(t)
			e := newEnv(t, plainManifest)
			t.Cleanup(func() {
				if t.Failed() {
					b, _ := os.ReadFile(filepath.Join(e.Data, "airlock", "daemon", "airlockd.log"))
					t.Logf("daemon log:\n%s", b)
				}
			})
			e.MustRun("daemon", "start")
			p := e.Start("run", "--", "sh", "-c", "echo before; echo oops >&2; sleep 1; echo after; exit 3")
			if !awaitAnyEvent(e, at, cmdTimeout) {
				r, _ := p.Wait(time.Minute)
				t.Fatalf("no sandbox had %s within %v: %s", at, cmdTimeout, r)
			}
			if killed := e.KillDaemons(); len(killed) == 0 {
				t.Fatalf("no control daemon to kill at %s", at)
			}
			r := p.MustWait(t, time.Minute)
			if r.Code != 3 || r.Stdout != "before\nafter\n" || r.Stderr != "oops\n" {
				t.Fatalf("run whose daemon was killed at %s: want exit 3, \"before\\nafter\\n\" and \"oops\\n\", got %s", at, r)
			}
			e.assertClean()
			for _, s := range e.PS() {
				if s.State == "failed" {
					t.Errorf("ps -a after the run lists a failed sandbox: %+v", s)
				}
			}
		})
	}
}

// awaitAnyEvent polls the daemon's API until one of its sandboxes has an
// event of kind (false after within).
func awaitAnyEvent(e *env, kind string, within time.Duration) bool {
	c := client.New(e.Socket())
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for ctx.Err() == nil {
		sbs, _ := c.List(ctx, nil)
		for _, sb := range sbs {
			evs, _ := c.History(ctx, sb.ID, 0)
			if slices.ContainsFunc(evs, func(ev client.Event) bool { return ev.Kind == kind }) {
				return true
			}
		}
		time.Sleep(time.Millisecond)
	}
	return false
}
