package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/test/clitest"
)

// TestEveryCommandThroughTheDaemon: the CLI reaches sandboxes only through
// the daemon. With its DOCKER_HOST a dead socket and KUBECONFIG an empty file,
// and AIRLOCK_HOST naming a daemon started beforehand with the real ones, the
// README's commands work: run (its output and exit code), up -d, exec, ps,
// logs, events, stop, an interactive up of the stopped sandbox (its shell's
// exit code), down, prune --dry-run; nothing is left.
func TestEveryCommandThroughTheDaemon(t *testing.T) {
	limit(t)
	e := newEnv(t, upManifest)
	e.MustRun("daemon", "start")
	empty := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e.Extra = append(e.Extra, "DOCKER_HOST=unix://"+filepath.Join(t.TempDir(), "dead.sock"), "KUBECONFIG="+empty,
		"AIRLOCK_HOST=unix://"+e.Socket(), "E2E_FOO=foo-value")

	r := e.Run("run", "--", "sh", "-c", `echo "out $FOO"; echo err >&2; exit 6`)
	if r.Code != 6 || r.Stdout != "out foo-value\n" || !strings.Contains(r.Stderr, "err\n") {
		t.Errorf("run: want exit 6, its stdout and stderr, got %s", r)
	}
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	if r = e.Run("exec", "--", "sh", "-c", "echo $FOO; exit 4"); r.Code != 4 || r.Stdout != "foo-value\n" {
		t.Errorf("exec: %s", r)
	}
	if r = e.Run("ps"); r.Code != 0 || !strings.Contains(r.Stdout, id) {
		t.Errorf("ps: want %s, got %s", id, r)
	}
	if r = e.Run("logs", "ticker"); r.Code != 0 || !strings.Contains(r.Stdout, "ticker-up") {
		t.Errorf("logs ticker: %s", r)
	}
	if r = e.Run("events", id); r.Code != 0 || !strings.Contains(r.Stdout, "sandbox.ready") {
		t.Errorf("events: %s", r)
	}
	if r = e.Run("stop"); r.Code != 0 || !strings.Contains(r.Stderr, "ticker") {
		t.Errorf("stop: want the shutdown line of ticker, got %s", r)
	}

	// up of the stopped sandbox, its shell reading a piped stdin.
	ctx, cancel := context.WithTimeout(context.Background(), clitest.CmdTimeout)
	defer cancel()
	cmd := e.Command(ctx, "up")
	cmd.Stdin = strings.NewReader("echo in-shell $FOO; exit 3\n")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || string(out) != "in-shell foo-value\n" {
		t.Errorf("up with a piped shell: want exit 3 and its line, got %v, stdout %q", err, out)
	}
	if ps := e.PS(); len(ps) != 1 || ps[0].ID != id || ps[0].State != "stopped" {
		t.Errorf("after the shell of up ended: want %s stopped, got %+v", id, ps)
	}
	e.MustRun("down")
	if r = e.Run("prune", "--dry-run"); r.Code != 0 {
		t.Errorf("prune --dry-run: %s", r)
	}
	e.assertClean()
}
