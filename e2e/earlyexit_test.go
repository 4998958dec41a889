package e2e

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestUpSupervisorCannotRun: up -d of a sandbox whose supervisor cannot even be
// executed in its image (AIRLOCK_SUPERVISOR_BINARY names a dynamically linked
// binary, and the busybox image has no loader for it) fails with exit 125 and
// the container's own words, instead of waiting forever for a sandbox the daemon
// left pending, and leaves nothing behind.
func TestUpSupervisorCannotRun(t *testing.T) {
	limit(t)
	e := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	bin := filepath.Join(t.TempDir(), "airlock")
	testenv.CopyFile(t, "/bin/true", bin, 0o755)
	if err := docker.CheckLinuxBinary(bin, runtime.GOARCH, true); err == nil {
		t.Fatalf("/bin/true is statically linked here; the test needs a dynamically linked binary")
	}
	e.Extra = append(e.Extra, "AIRLOCK_SUPERVISOR_BINARY="+bin)
	t.Cleanup(func() { e.removeOwnedVolumes() })

	r := e.Run("up", "-d")
	if r.Code != 125 {
		t.Errorf("up -d with a supervisor that cannot run: want exit 125, got %s", r)
	}
	// (runc 1.1 ends such a container with 1, runc 1.2 and later with 255.)
	contains(t, "stderr of up -d", r.Stderr, "exited (exit code ", ") before the sandbox was ready", "no such file or directory")
	e.assertClean()
	if ps := e.PS(); len(ps) != 0 {
		t.Errorf("after a failed up -d, ps -a lists %+v", ps)
	}
}

// removeOwnedVolumes removes the volumes the environment's daemon made (a
// supervisor volume of a binary of the test's own), its containers first.
func (e *env) removeOwnedVolumes() {
	key, err := os.ReadFile(filepath.Join(e.Paths().DaemonDir(), "owner-key"))
	if err != nil {
		return
	}
	e.StopDaemon()
	ctx := context.Background()
	list, err := e.Cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", backend.LabelOwner+"="+strings.TrimSpace(string(key))))})
	if err != nil {
		return
	}
	for _, v := range list.Volumes {
		_ = e.Cli.VolumeRemove(ctx, v.Name, true)
	}
}
