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

	"github.com/airlock-dev/airlock/backend"
)

// TestOtherDaemonsSandboxesUntouched: two users' control daemons share one Engine
// (CI jobs on one Docker socket). `run --id X` where X is the other daemon's
// sandbox fails without removing anything of it (design.md §7, the security issue).
func TestOtherDaemonsSandboxesUntouched(t *testing.T) {
	limit(t)
	theirs := newEnv(t, plainManifest)
	mine := newEnv(t, plainManifest)
	id := uniq("shared-id")
	theirs.MustRun("run", "--keep", "--id", id, "--", "true")

	r := mine.Run("run", "--id", id, "--", "true")
	if r.Code == 0 {
		t.Fatalf("run --id of another daemon's sandbox: want a failure, got %s", r)
	}
	contains(t, "stderr", r.Stderr, id, "already exists")
	ctx := context.Background()
	if _, err := theirs.Cli.ContainerInspect(ctx, "airlock-"+id); err != nil {
		t.Fatalf("the other daemon's sandbox was removed: %v", err)
	}
	theirs.MustRun("rm", id)
	theirs.assertClean()
	mine.assertClean()
}

// TestReaperKeepsOtherOwners: the reaper removes a run sandbox of its own whose
// CLI is gone, even one missing from its store, and never another daemon's, whose
// CLI pid may only look dead from here (another PID namespace, hidepid=2).
func TestReaperKeepsOtherOwners(t *testing.T) {
	limit(t)
	e := newEnv(t, plainManifest)
	e.MustRun("daemon", "start")
	key, deadPid := ownerKeyAndDeadPID(t, e)
	ctx := context.Background()
	make := func(id, owner string) string {
		c, err := e.Cli.ContainerCreate(ctx, &container.Config{Image: e.Image, Cmd: []string{"true"}, Labels: map[string]string{
			backend.LabelSandbox: id, backend.LabelRole: "primary", backend.LabelKind: backend.KindRun,
			backend.LabelCLIPid: deadPid, backend.LabelProject: e.Project, backend.LabelOwner: owner,
		}}, nil, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	foreign := make(uniq("foreign"), "0123456789abcdef0123456789abcdef")
	reaperPasses(t, e, key, deadPid)
	if _, err := e.Cli.ContainerInspect(ctx, foreign); err != nil {
		t.Errorf("the reaper removed another daemon's sandbox: %v", err)
	}
	_ = e.Cli.ContainerRemove(ctx, foreign, container.RemoveOptions{Force: true})
}

// reaperPasses returns after the daemon's reaper made at least one whole pass
// after the call: an orphan run sandbox of its own (a container labelled with its
// owner key and a dead CLI pid) made after the first was removed is removed by a
// later pass.
func reaperPasses(t *testing.T, e *env, key, deadPid string) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		c, err := e.Cli.ContainerCreate(ctx, &container.Config{Image: e.Image, Cmd: []string{"true"}, Labels: map[string]string{
			backend.LabelSandbox: uniq("own"), backend.LabelRole: "primary", backend.LabelKind: backend.KindRun,
			backend.LabelCLIPid: deadPid, backend.LabelProject: e.Project, backend.LabelOwner: key,
		}}, nil, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the reaper to remove the daemon's own orphan", func() bool {
			_, err := e.Cli.ContainerInspect(ctx, c.ID)
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
	e.MustRun("run", "--keep", "--id", id, "--", "true")
	key, deadPid := ownerKeyAndDeadPID(t, e)
	reaperPasses(t, e, key, deadPid)
	if ps := e.PS(); len(ps) != 1 || ps[0].ID != id || ps[0].State != "stopped" {
		t.Fatalf("the kept sandbox is gone after the reaper's passes: ps -a = %+v", ps)
	}
	e.MustRun("rm", id)
	e.assertClean()
}

// ownerKeyAndDeadPID returns the owner key of the environment's daemon and the
// pid of a process that has exited (a CLI that is gone).
func ownerKeyAndDeadPID(t *testing.T, e *env) (key, pid string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.Paths().DaemonDir(), "owner-key"))
	if err != nil {
		t.Fatal(err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b)), strconv.Itoa(gone.Process.Pid)
}
