package docker

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/engine"
)

// What the control daemon needs of a backend beyond the sandbox lifecycle, for
// the Docker Engine: where it is, the hooks it reports through, how primaries end.

var (
	_ backend.Backend   = (*Runtime)(nil)
	_ backend.DataDirer = (*Runtime)(nil)
)

// DataDir is the data directory of the runtime's Paths (ok false without
// them): the daemon's default places for exec output and the empty project
// are there.
func (rt *Runtime) DataDir() (dir string, ok bool) {
	if rt == nil || rt.Paths == nil {
		return "", false
	}
	return rt.Paths.DataDir, true
}

// Location is the Engine this runtime runs sandboxes on.
func (rt *Runtime) Location() engine.Endpoint { return rt.Endpoint }

// SetHooks sets OnService and OnStep.
func (rt *Runtime) SetHooks(onService func(sandboxID, service string, ready bool, detail string), onStep func(sandboxID, step string, d time.Duration)) {
	rt.OnService, rt.OnStep = onService, onStep
}

// WatchPrimaries reports the deaths and OOM kills of this daemon's primaries from
// the Engine's event stream until ctx ends or the stream breaks (its error).
func (rt *Runtime) WatchPrimaries(ctx context.Context, on func(backend.PrimaryEvent)) error {
	args := filters.NewArgs(filters.Arg("type", "container"), filters.Arg("label", backend.LabelRole+"=primary"),
		filters.Arg("event", "die"), filters.Arg("event", "oom"))
	if rt.Owner != "" {
		args.Add("label", backend.LabelOwner+"="+rt.Owner)
	}
	msgs, errs := rt.Engine.Events(ctx, events.ListOptions{Filters: args})
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errs:
			return err
		case m := <-msgs:
			ev := backend.PrimaryEvent{SandboxID: m.Actor.Attributes[backend.LabelSandbox]}
			switch m.Action {
			case events.ActionOOM:
				ev.OOM = true
			case events.ActionDie:
				ev.Died = true
				if code, err := strconv.Atoi(m.Actor.Attributes["exitCode"]); err == nil {
					ev.ExitCode = &code
				}
			default:
				continue
			}
			if ev.SandboxID != "" {
				on(ev)
			}
		}
	}
}

// PrimaryEnd returns the exit code and the last lines (at most lines) of the
// output of a primary container that ran and exited; ok is false when it did not
// (it runs, it never started, it is gone).
func (rt *Runtime) PrimaryEnd(ctx context.Context, containerID string, lines int) (code *int, output string, ok bool) {
	ci, err := rt.Engine.ContainerInspect(ctx, containerID)
	if err != nil || ci.State == nil || ci.State.Status != container.StateExited {
		return nil, "", false
	}
	c := ci.State.ExitCode
	rc, err := rt.Engine.ContainerLogs(ctx, containerID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: fmt.Sprint(lines)})
	if err != nil {
		return &c, "", true
	}
	defer rc.Close()
	var buf bytes.Buffer
	if ci.Config != nil && ci.Config.Tty {
		_, _ = buf.ReadFrom(rc)
	} else {
		_, _ = stdcopy.StdCopy(&buf, &buf, rc)
	}
	return &c, buf.String(), true
}

// KillPrimary sends a signal ("SIGKILL") to a primary container's PID 1.
func (rt *Runtime) KillPrimary(ctx context.Context, containerID, signal string) error {
	err := rt.Engine.ContainerKill(ctx, containerID, signal)
	if err != nil && strings.Contains(err.Error(), "is not running") {
		return nil
	}
	return err
}
