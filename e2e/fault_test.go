package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
