package docker

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
)

// unstartableEngine is the real Engine, except that the first fail user execs
// it is asked for get a working directory that does not exist: the Engine then
// fails to start their process as it does when runc fails under load (126, its
// message where the output would be, no PID), which a test cannot bring about
// on demand. (A current Engine answers 127 for this cause: notStartedCode.)
type unstartableEngine struct {
	client.APIClient
	fail atomic.Int32
}

func (e *unstartableEngine) ContainerExecCreate(ctx context.Context, id string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	if slices.Contains(o.Cmd, "exec") && e.fail.Add(-1) >= 0 {
		o.WorkingDir = "/no-such-dir-for-the-fault"
	}
	return e.APIClient.ContainerExecCreate(ctx, id, o)
}

// TestExecStartsAgainWhenTheEngineDidNotStartIt: an exec whose process the Engine
// failed to start is started again, and its caller sees only the attempt that
// ran; one that never starts ends with the Engine's code for it (126 on Engine
// 20.10, 127 for a missing directory on a current one) and its message on
// stderr, not on stdout.
func TestExecStartsAgainWhenTheEngineDidNotStartIt(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := testContext(t, 2*time.Minute)
	sb := g.create(ctx, g.manifest(t.TempDir(), "[sandbox]\nimage = \"{{busybox}}\"\n"), "sleep", "300")
	if err := g.rt.Start(ctx, sb); err != nil {
		t.Fatalf("Start: %v", err)
	}
	eng := &unstartableEngine{APIClient: g.cli}
	rt := &Runtime{Engine: eng}

	exec := func(cmd ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr syncBuffer
		ex, err := rt.Exec(ctx, sb, backend.ExecRequest{Cmd: cmd}, backend.Streams{Stdout: &stdout, Stderr: &stderr})
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		if err := <-ex.Done; err != nil {
			t.Fatalf("the exec's output: %v", err)
		}
		code, err := ex.ExitCode(ctx)
		if err != nil {
			t.Fatalf("ExitCode: %v", err)
		}
		return code, stdout.String(), stderr.String()
	}

	eng.fail.Store(execStartRetries)
	code, stdout, stderr := exec("sh", "-c", "echo out; echo err >&2; exit 3")
	if code != 3 || stdout != "out\n" || stderr != "err\n" {
		t.Errorf("after %d failed starts: code %d, stdout %q, stderr %q; want 3, \"out\\n\", \"err\\n\"", execStartRetries, code, stdout, stderr)
	}

	eng.fail.Store(execStartRetries + 1)
	code, stdout, stderr = exec("echo", "never")
	if !notStartedCode(code) || stdout != "" || !strings.Contains(stderr, "airlock: the Engine could not start the command: ") || !strings.Contains(stderr, "no-such-dir-for-the-fault") {
		t.Errorf("an exec that never starts: code %d, stdout %q, stderr %q; want 126 (127 on a current Engine) and the Engine's message on stderr", code, stdout, stderr)
	}

	// A command that starts and exits 126 itself is not started again.
	eng.fail.Store(0)
	code, stdout, _ = exec("sh", "-c", "echo once; exit 126")
	if code != 126 || stdout != "once\n" {
		t.Errorf("a command exiting 126: code %d, stdout %q; want 126 and one \"once\\n\"", code, stdout)
	}
}
