package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/airlock-dev/airlock/supervisor"
)

// WaitReady waits until the supervisor reports that every daemon is ready and the
// main process started (the supervisor.ready event). If the container exits first,
// the error carries its exit code and its last output lines.
func (rt *Runtime) WaitReady(ctx context.Context, sb *Sandbox, since time.Time) error {
	status := filepath.Join(sb.StateDir, "status.jsonl")
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	n := 0
	for {
		if readyAfter(status, since) {
			return nil
		}
		if n%10 == 0 {
			ci, err := rt.Engine.ContainerInspect(ctx, sb.PrimaryID)
			if err != nil {
				return failed("cannot inspect sandbox %s: %v", sb.ID, err)
			}
			if ci.State != nil && !ci.State.Running && ci.State.Status != "created" {
				if readyAfter(status, since) {
					return nil
				}
				return &Error{Code: 125, Err: fmt.Errorf("sandbox %s exited with code %d before it was ready:\n%s", sb.ID, ci.State.ExitCode, rt.lastLines(ctx, sb.PrimaryID, 20))}
			}
		}
		n++
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func readyAfter(path string, since time.Time) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	dec := supervisor.NewStatusDecoder(f)
	for {
		ev, err := dec.Next()
		if err != nil {
			return false
		}
		if ev.Kind == "supervisor.ready" && !ev.Time.Before(since.Add(-time.Second)) {
			return true
		}
	}
}

// lastLines returns the last n lines of a container's output.
func (rt *Runtime) lastLines(ctx context.Context, id string, n int) string {
	rc, err := rt.Engine.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: fmt.Sprint(n)})
	if err != nil {
		return "(no output: " + err.Error() + ")"
	}
	defer rc.Close()
	var out bytes.Buffer
	ci, _ := rt.Engine.ContainerInspect(ctx, id)
	if ci.Config != nil && ci.Config.Tty {
		_, _ = out.ReadFrom(rc)
	} else {
		_, _ = stdcopy.StdCopy(&out, &out, rc)
	}
	return strings.TrimRight(out.String(), "\n")
}

// Shell returns the shell for `up`: sandbox.shell, else the image's SHELL, else /bin/sh.
func (rt *Runtime) Shell(ctx context.Context, sb *Sandbox) []string {
	if sb.manifest != nil && len(sb.manifest.Sandbox.Shell) > 0 {
		return sb.manifest.Sandbox.Shell
	}
	ci, err := rt.Engine.ContainerInspect(ctx, sb.PrimaryID)
	if err == nil && ci.Config != nil {
		for _, e := range ci.Config.Env {
			if v, ok := strings.CutPrefix(e, "SHELL="); ok && v != "" {
				return []string{v}
			}
		}
	}
	return []string{"/bin/sh"}
}

// PrimaryState returns the primary container's state ("running", "exited", …).
func (rt *Runtime) PrimaryState(ctx context.Context, sb *Sandbox) (string, error) {
	ci, err := rt.Engine.ContainerInspect(ctx, sb.PrimaryID)
	if err != nil {
		return "", failed("cannot inspect sandbox %s: %v", sb.ID, err)
	}
	return ci.State.Status, nil
}
