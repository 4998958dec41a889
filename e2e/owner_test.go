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
	// Two passes of the reaper at least: an orphan of its own made after the
	// first was removed is removed by a later pass, which saw the foreign one too.
	for i := 0; i < 2; i++ {
		own := make(uniq("own"), strings.TrimSpace(string(key)))
		eventually(t, 30*time.Second, "the reaper to remove the daemon's own orphan", func() bool {
			_, err := e.cli.ContainerInspect(ctx, own)
			return cerrdefs.IsNotFound(err)
		})
	}
	if _, err := e.cli.ContainerInspect(ctx, foreign); err != nil {
		t.Errorf("the reaper removed another daemon's sandbox: %v", err)
	}
	_ = e.cli.ContainerRemove(ctx, foreign, container.RemoveOptions{Force: true})
}
