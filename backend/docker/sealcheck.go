package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
)

// OnlyInitRuns reports whether the Engine lists no process in a container
// but its PID 1 (the supervisor), or none at all (the supervisor, which
// exits right after a sealed end, may be gone already): what the host checks
// of a sealed end marker (supervisor.SealedEndMarker) before it believes it,
// since a process in the sandbox can print one. False when the Engine cannot
// say.
//
// On an Engine of this host it counts the processes of the container's cgroup
// itself (a few file reads); elsewhere, or when the cgroup is not found there,
// it asks the Engine to list them (`docker top`: a ps of the Engine's host,
// ~50 ms).
func (rt *Runtime) OnlyInitRuns(ctx context.Context, containerID string) bool {
	ci, err := rt.Engine.ContainerInspect(ctx, containerID)
	if err != nil || ci.ContainerJSONBase == nil || ci.State == nil {
		return false
	}
	if !ci.State.Running {
		return true
	}
	if !rt.Remote && ci.State.Pid > 0 {
		pids := enginePIDs{engine: rt.Engine, proven: &rt.hostPIDs}
		if n, ok := pids.cgroupProcs(ci); ok {
			return n <= 1
		}
		// PID 1 has exited since the Engine named it (a run's supervisor
		// exits right after its sealed marker): when PID 1 of a PID
		// namespace ends, the kernel kills every other process in it. Its
		// PID is ours to look up only if the Engine's PIDs are this host's.
		if pidGone(ci.State.Pid) && pids.seen(ctx) {
			return true
		}
	}
	top, err := rt.Engine.ContainerTop(ctx, containerID, nil)
	if err == nil {
		return len(top.Processes) <= 1
	}
	ci, err = rt.Engine.ContainerInspect(ctx, containerID)
	return err == nil && ci.State != nil && !ci.State.Running
}

// cgroupProcs counts the processes of the cgroup of process pid of this host,
// which must be container id's (its path names the container: cgroupfs's
// /docker/ID, systemd's docker-ID.scope; an Engine in a VM has other PIDs).
// The pids hierarchy of cgroup v1, else the unified one of v2. A cgroup gone
// (the container exited meanwhile) has none.
func cgroupProcs(pid int, id string) (int, bool) {
	if id == "" {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return 0, false
	}
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.Contains(parts[2], id) || strings.Contains(parts[2], "..") {
			continue
		}
		switch {
		case slices.Contains(strings.Split(parts[1], ","), "pids"):
			dirs = append([]string{filepath.Join("/sys/fs/cgroup/pids", parts[2])}, dirs...)
		case parts[0] == "0" && parts[1] == "":
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", parts[2]))
		}
	}
	for _, d := range dirs {
		procs, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err == nil {
			return len(strings.Fields(string(procs))), true
		}
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat(filepath.Dir(d)); serr == nil {
				return 0, true // the container's cgroup went with it
			}
		}
	}
	return 0, false
}

// enginePIDs tells whether the PIDs of an Engine's containers are this
// host's: once proven (by a container's cgroup found here), it is kept in
// proven (the runtime's).
type enginePIDs struct {
	engine client.APIClient
	proven *atomic.Bool
}

// cgroupProcs is cgroupProcs of the PID 1 of a container the Engine
// inspected; a count found proves the Engine's PIDs are this host's.
func (e enginePIDs) cgroupProcs(ci container.InspectResponse) (int, bool) {
	if ci.State.Pid <= 0 {
		return 0, false
	}
	n, ok := cgroupProcs(ci.State.Pid, ci.ID)
	if ok {
		e.proven.Store(true)
	}
	return n, ok
}

// pidGone reports whether no process of this host has pid.
func pidGone(pid int) bool {
	err := syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}

// seen reports whether the Engine's containers run in this
// process's PID namespace (an Engine in a VM's do not): once one of its
// running sandboxes' PID 1, as the Engine names it, is found in a cgroup
// whose path names that container. Proven once, it is kept.
func (e enginePIDs) seen(ctx context.Context) bool {
	if e.proven.Load() {
		return true
	}
	list, err := e.engine.ContainerList(ctx, container.ListOptions{Limit: 4, Filters: filters.NewArgs(filters.Arg("status", "running"), filters.Arg("label", backend.LabelSandbox))})
	if err != nil {
		return false
	}
	for _, c := range list {
		ci, err := e.engine.ContainerInspect(ctx, c.ID)
		if err != nil || ci.ContainerJSONBase == nil || ci.State == nil {
			continue
		}
		if _, ok := e.cgroupProcs(ci); ok {
			return true
		}
	}
	return false
}
