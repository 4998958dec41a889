package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/airlock-dev/airlock/sandbox"
)

// TestOtherDaemonsSandboxesUntouched: two users' control daemons share one Engine
// (CI jobs on one Docker socket). `run --id X` where X is the other daemon's
// sandbox fails without removing anything of it (DESIGN §7, the security issue).
func TestOtherDaemonsSandboxesUntouched(t *testing.T) {
	limit(t)
	theirs := newEnv(t, plainManifest)
	mine := newEnv(t, plainManifest)
	id := uniq("shared-id")
	theirs.mustRun("run", "--keep", "--id", id, "--", "true")

	r := mine.run("run", "--id", id, "--", "true")
	if r.code == 0 {
		t.Fatalf("run --id of another daemon's sandbox: want a failure, got %s", r)
	}
	contains(t, "stderr", r.stderr, id, "already exists")
	ctx := context.Background()
	if _, err := theirs.cli.ContainerInspect(ctx, "airlock-"+id); err != nil {
		t.Fatalf("the other daemon's sandbox was removed: %v", err)
	}
	theirs.mustRun("rm", id)
	theirs.assertClean()
	mine.assertClean()
}

// TestReaperKeepsOtherOwners: the reaper removes a run sandbox of its own whose
// CLI is gone, even one missing from its store, and never another daemon's, whose
// CLI pid may only look dead from here (another PID namespace, hidepid=2).
func TestReaperKeepsOtherOwners(t *testing.T) {
	limit(t)
	e := newEnv(t, plainManifest)
	e.mustRun("daemon", "start")
	key, err := os.ReadFile(filepath.Join(e.data, "airlock", "daemon", "owner-key"))
	if err != nil {
		t.Fatal(err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadPid := strconv.Itoa(gone.Process.Pid)
	ctx := context.Background()
	make := func(id, owner string) string {
		c, err := e.cli.ContainerCreate(ctx, &container.Config{Image: e.image, Cmd: []string{"true"}, Labels: map[string]string{
			sandbox.LabelSandbox: id, sandbox.LabelRole: "primary", sandbox.LabelKind: sandbox.KindRun,
			sandbox.LabelCLIPid: deadPid, sandbox.LabelProject: e.project, sandbox.LabelOwner: owner,
		}}, nil, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	foreign := make(uniq("foreign"), "0123456789abcdef0123456789abcdef")
	reaperPasses(t, e, strings.TrimSpace(string(key)), deadPid)
	if _, err := e.cli.ContainerInspect(ctx, foreign); err != nil {
		t.Errorf("the reaper removed another daemon's sandbox: %v", err)
	}
	_ = e.cli.ContainerRemove(ctx, foreign, container.RemoveOptions{Force: true})
}

// reaperPasses returns after the daemon's reaper made at least one whole pass
// after the call: an orphan run sandbox of its own (a container labelled with its
// owner key and a dead CLI pid) made after the first was removed is removed by a
// later pass.
func reaperPasses(t *testing.T, e *env, key, deadPid string) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		c, err := e.cli.ContainerCreate(ctx, &container.Config{Image: e.image, Cmd: []string{"true"}, Labels: map[string]string{
			sandbox.LabelSandbox: uniq("own"), sandbox.LabelRole: "primary", sandbox.LabelKind: sandbox.KindRun,
			sandbox.LabelCLIPid: deadPid, sandbox.LabelProject: e.project, sandbox.LabelOwner: key,
		}}, nil, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the reaper to remove the daemon's own orphan", func() bool {
			_, err := e.cli.ContainerInspect(ctx, c.ID)
			return cerrdefs.IsNotFound(err)
		})
	}
}

// TestKeptRunNotReaped: a `run --keep` sandbox stays after its CLI exited, through
// reaper passes, until `airlock rm`.
func TestKeptRunNotReaped(t *testing.T) {
	limit(t)
	e := newEnv(t, plainManifest)
	id := uniq("kept")
	e.mustRun("run", "--keep", "--id", id, "--", "true")
	key, err := os.ReadFile(filepath.Join(e.data, "airlock", "daemon", "owner-key"))
	if err != nil {
		t.Fatal(err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	reaperPasses(t, e, strings.TrimSpace(string(key)), strconv.Itoa(gone.Process.Pid))
	if ps := e.ps(); len(ps) != 1 || ps[0].ID != id || ps[0].State != "stopped" {
		t.Fatalf("the kept sandbox is gone after the reaper's passes: ps -a = %+v", ps)
	}
	e.mustRun("rm", id)
	e.assertClean()
}
