package e2e

import (
	"os"
	"path/filepath"
	"strconv"
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
	flag := filepath.Join(e.project, "go-on")
	p := e.start("run", "--", "sh", "-c", "echo before; while [ ! -e "+flag+" ]; do sleep 0.05; done; echo after; exit 3")
	eventually(t, cmdTimeout, "the main command to run", func() bool { return strings.Contains(p.stdout.String(), "before") })
	pidFile := filepath.Join(e.data, "airlock", "daemon", "airlockd.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t, time.Minute)
	if r.code != 3 || r.stdout != "before\nafter\n" {
		t.Fatalf("run while its daemon was killed: want exit 3 and the whole output once, got %s", r)
	}
	e.assertClean()
	if ps := e.ps(); len(ps) != 0 {
		t.Errorf("ps -a after the run lists %+v", ps)
	}
}
