package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/internal/proc"
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
	if !rt.Remote {
		if n, ok := rt.procsAt.count(containerID); ok {
			return n <= 1
		}
	}
	ci, err := rt.Engine.ContainerInspect(ctx, containerID)
	if err != nil || ci.ContainerJSONBase == nil || ci.State == nil {
		return false
	}
	if !ci.State.Running {
		return true
	}
	if !rt.Remote && ci.State.Pid > 0 {
		pids := enginePIDs{engine: rt.Engine, proven: &rt.hostPIDs, procsAt: &rt.procsAt}
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
	n, _, ok := cgroupProcsFile(pid, id)
	return n, ok
}

// cgroupProcsFile is cgroupProcs with the cgroup.procs file it read ("" when
// the cgroup was gone).
func cgroupProcsFile(pid int, id string) (int, string, bool) {
	if id == "" {
		return 0, "", false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return 0, "", false
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
		file := filepath.Join(d, "cgroup.procs")
		procs, err := os.ReadFile(file)
		if err == nil {
			return running(procs), file, true
		}
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat(filepath.Dir(d)); serr == nil {
				return 0, "", true // the container's cgroup went with it
			}
		}
	}
	return 0, "", false
}

// procsPlace is where this host keeps a container's cgroup.procs: the path
// of one container's with its ID cut out, learned from the first container
// counted through the Engine (cgroupfs names it /docker/ID, systemd
// docker-ID.scope: the same for every container of an Engine). A sealed end
// is then checked with one file read, without asking the Engine first (an
// inspect, some milliseconds of a warm run).
type procsPlace struct {
	at atomic.Pointer[[2]string] // the path before the ID, and after it
}

// learn keeps the place of file, container id's cgroup.procs.
func (p *procsPlace) learn(file, id string) {
	i := strings.LastIndex(file, id)
	if i < 0 || !fullID(id) {
		return
	}
	p.at.Store(&[2]string{file[:i], file[i+len(id):]})
}

// count counts the processes in container id's cgroup at the place learned:
// not ok when none was learned or the file is not there (a container that
// exited, or not of this Engine: the Engine is asked then).
func (p *procsPlace) count(id string) (int, bool) {
	at := p.at.Load()
	if at == nil || !fullID(id) {
		return 0, false
	}
	b, err := os.ReadFile(at[0] + id + at[1])
	if err != nil {
		return 0, false
	}
	return running(b), true
}

// running counts the processes a cgroup.procs lists that can still run code
// of their own: one in the kernel's exit (killed by a sealed end, its inotify
// instance being torn down) is listed until that exit is done, milliseconds
// later, though nothing of it runs (proc.Ended, the supervisor's own check).
// A cgroup of at most one process is not looked into.
func running(procs []byte) int {
	pids := strings.Fields(string(procs))
	if len(pids) <= 1 {
		return len(pids)
	}
	n := 0
	for _, p := range pids {
		pid, err := strconv.Atoi(p)
		if err != nil || !proc.Ended(pid) {
			n++
		}
	}
	return n
}

// fullID reports whether id is a container's full ID (64 hex digits): what
// a cgroup's path names, and nothing that could lead elsewhere in a path.
func fullID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// enginePIDs tells whether the PIDs of an Engine's containers are this
// host's: once proven (by a container's cgroup found here), it is kept in
// proven (the runtime's).
type enginePIDs struct {
	engine client.APIClient
	proven *atomic.Bool
	// procsAt, when set, learns where containers' cgroup.procs are.
	procsAt *procsPlace
}

// cgroupProcs is cgroupProcs of the PID 1 of a container the Engine
// inspected; a count found proves the Engine's PIDs are this host's.
func (e enginePIDs) cgroupProcs(ci container.InspectResponse) (int, bool) {
	if ci.State.Pid <= 0 {
		return 0, false
	}
	n, file, ok := cgroupProcsFile(ci.State.Pid, ci.ID)
	if ok {
		e.proven.Store(true)
		if file != "" && e.procsAt != nil {
			e.procsAt.learn(file, ci.ID)
		}
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
