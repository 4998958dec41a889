package docker

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/internal/proc"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestOnlyInitRuns: what a sealed end marker is checked against, on a real
// Engine: a container with its PID 1 alone passes; one with a second process
// (an exec) does not, counted from its cgroup on this host and through the
// Engine's list alike; a cgroup of another container does not count for it;
// a stopped container passes.
func TestOnlyInitRuns(t *testing.T) {
	t.Parallel()
	cli := testenv.Client(t)
	ctx := testContext(t, 2*time.Minute)
	img := testenv.BusyboxImage(t)
	rt := &Runtime{Engine: cli}
	start := func() string {
		c, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: []string{"sleep", "300"}, Labels: map[string]string{backend.LabelSandbox: "sealcheck"}}, &container.HostConfig{}, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}) })
		if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	id, other := start(), start()
	if !rt.OnlyInitRuns(ctx, id) {
		t.Errorf("a container running its PID 1 alone: want true")
	}
	ci, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := cgroupProcs(ci.State.Pid, ci.ID); !ok || n != 1 {
		t.Errorf("cgroupProcs of its PID 1 = %d, %v; want 1, true", n, ok)
	}
	if _, ok := cgroupProcs(ci.State.Pid, other); ok {
		t.Errorf("cgroupProcs of its PID 1 named as another container's: counted")
	}
	// The first count through the Engine taught where this host keeps a
	// container's cgroup.procs: the others are read there, the Engine not asked.
	if n, ok := rt.procsAt.count(other); !ok || n != 1 {
		t.Errorf("procsAt.count of another container running its PID 1 alone = %d, %v; want 1, true", n, ok)
	}
	if _, ok := rt.procsAt.count("../" + other[3:]); ok {
		t.Errorf("procsAt.count of a name that is not a container's ID: counted")
	}
	ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerExecStart(ctx, ex.ID, container.ExecStartOptions{Detach: true}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the exec to run", func() bool {
		in, err := cli.ContainerExecInspect(ctx, ex.ID)
		return err == nil && in.Running && in.Pid != 0
	})
	if rt.OnlyInitRuns(ctx, id) {
		t.Errorf("a container with an exec running: want false")
	}
	if n, ok := cgroupProcs(ci.State.Pid, ci.ID); !ok || n != 2 {
		t.Errorf("cgroupProcs with an exec = %d, %v; want 2, true", n, ok)
	}
	if n, ok := rt.procsAt.count(id); !ok || n != 2 {
		t.Errorf("procsAt.count with an exec = %d, %v; want 2, true", n, ok)
	}
	remote := &Runtime{Engine: cli, Remote: true} // through the Engine's list
	if remote.OnlyInitRuns(ctx, id) {
		t.Errorf("through the Engine's list, a container with an exec running: want false")
	}
	if !remote.OnlyInitRuns(ctx, other) {
		t.Errorf("through the Engine's list, a container running its PID 1 alone: want true")
	}
	// The Engine said running, but its PID 1 has exited since (a run's
	// supervisor exits right after its sealed marker): when PID 1 of a PID
	// namespace ends, the kernel kills the rest, so none runs beside it. That
	// PID is looked up here once the Engine's PIDs are proven to be this
	// host's, rather than through the Engine's list, which is slow (~0.1 s)
	// and refuses (409) a container being torn down.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if !pidGone(gone.Process.Pid) || pidGone(os.Getpid()) {
		t.Errorf("pidGone: an exited process %v, this one %v; want true, false", pidGone(gone.Process.Pid), pidGone(os.Getpid()))
	}
	if fresh := (&Runtime{Engine: cli}); !(enginePIDs{engine: fresh.Engine, proven: &fresh.hostPIDs}).seen(ctx) {
		t.Errorf("enginePIDs.seen with sandboxes running on the local Engine: want true")
	}
	timeout := 0
	if err := cli.ContainerStop(ctx, id, container.StopOptions{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	if !rt.OnlyInitRuns(ctx, id) {
		t.Errorf("a stopped container: want true")
	}
	if _, ok := rt.procsAt.count(id); ok {
		t.Errorf("procsAt.count of a stopped container: counted (its cgroup is gone: the Engine says)")
	}
}

// A cgroup's processes that can no longer run (a zombie, one gone since the
// list was read, one in the kernel's exit) are not counted against a sealed
// end; a live one, or a PID not of this namespace (listed as 0), is.
func TestRunningSkipsEnded(t *testing.T) {
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the process to be a zombie", func() bool {
		st, _, _ := proc.State(zombie.Process.Pid)
		return st == "Z"
	})
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	for _, c := range []struct {
		procs string
		want  int
	}{
		{"", 0},
		{self + "\n", 1},
		{strconv.Itoa(gone.Process.Pid) + "\n", 1}, // one alone is not looked into
		{self + "\n" + strconv.Itoa(zombie.Process.Pid) + "\n" + strconv.Itoa(gone.Process.Pid) + "\n", 1},
		{self + "\n0\n", 2},
		{self + "\n" + self + "\n", 2},
	} {
		if got := running([]byte(c.procs)); got != c.want {
			t.Errorf("running(%q) = %d, want %d", c.procs, got, c.want)
		}
	}
	_ = zombie.Wait()
}
