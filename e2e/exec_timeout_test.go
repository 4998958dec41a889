package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestExecTimeoutFlag: `airlock exec --timeout` ends a command that runs too
// long with exit code 124, its output until then shown; one that ends in time
// keeps its own code; a negative timeout is a usage error.
func TestExecTimeoutFlag(t *testing.T) {
	limit(t)
	e := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\nnetwork = \"none\"\n")
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	defer e.MustRun("down", id)
	start := time.Now()
	r := e.Run("exec", "--timeout", "1s", id, "--", "sh", "-c", "echo started; sleep 30")
	if r.Code != 124 || r.Stdout != "started\n" || time.Since(start) > 20*time.Second {
		t.Errorf("exec --timeout 1s of sleep 30: exit %d after %v, stdout %q; want 124, %q\nstderr: %s", r.Code, time.Since(start), r.Stdout, "started\n", r.Stderr)
	}
	if r := e.Run("exec", "--timeout", "30s", id, "--", "sh", "-c", "exit 3"); r.Code != 3 {
		t.Errorf("exec --timeout 30s of exit 3: exit %d, want 3\nstderr: %s", r.Code, r.Stderr)
	}
	if r := e.Run("exec", "--timeout", "-1s", id, "--", "true"); r.Code != 2 || !strings.Contains(r.Stderr, "--timeout") {
		t.Errorf("exec --timeout -1s: exit %d, stderr %q; want 2 naming --timeout", r.Code, r.Stderr)
	}
}
