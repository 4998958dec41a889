package sandbox

import (
	"context"
	"fmt"
	"strings"

	"github.com/docker/docker/api/types/container"
)

// ExecRequest runs a command in a running sandbox.
type ExecRequest struct {
	Cmd     []string
	Env     []string // K=V from -e
	Workdir string
	TTY     bool
	Stdin   bool
}

// Exec is a started exec: Wait for its exit code after its output ends.
type Exec struct {
	ID       string
	Done     <-chan error
	exitCode func(context.Context) (int, error)
	resize   func(ctx context.Context, height, width uint) error
}

// NewExec is an exec started by another backend than the Docker Engine: done
// ends with its output, exitCode reads its code once it finished, resize sets its
// terminal size (nil when it has none).
func NewExec(id string, done <-chan error, exitCode func(context.Context) (int, error), resize func(ctx context.Context, height, width uint) error) *Exec {
	return &Exec{ID: id, Done: done, exitCode: exitCode, resize: resize}
}

// Exec starts a command in the sandbox through `airlock supervise exec`, which
// gives it the sandbox's [env] (substituted values included) from the spec and
// the caller's -e values delivered apart (ExecArgv), so the exec's own
// configuration holds neither.
func (rt *Runtime) Exec(ctx context.Context, sb *Sandbox, req ExecRequest, s Streams) (*Exec, error) {
	argv, err := ExecArgv(ctx, rt, sb.PrimaryID, req)
	if err != nil {
		if strings.Contains(err.Error(), "is not running") {
			return nil, failed("sandbox %s is not running (start it with `airlock up -d`)", sb.ID)
		}
		return nil, err
	}
	resp, err := rt.Engine.ContainerExecCreate(ctx, sb.PrimaryID, container.ExecOptions{
		Cmd: argv, Tty: req.TTY, AttachStdin: req.Stdin, AttachStdout: true, AttachStderr: true,
		WorkingDir: req.Workdir,
	})
	if err != nil {
		if strings.Contains(err.Error(), "is not running") {
			return nil, failed("sandbox %s is not running (start it with `airlock up -d`)", sb.ID)
		}
		return nil, failed("cannot create the exec: %v", err)
	}
	hj, err := rt.Engine.ContainerExecAttach(ctx, resp.ID, container.ExecAttachOptions{Tty: req.TTY})
	if err != nil {
		return nil, failed("cannot attach to the exec: %v", err)
	}
	if !req.Stdin {
		s.Stdin = nil
	}
	id := resp.ID
	return NewExec(id, pump(hj, req.TTY, s), func(ctx context.Context) (int, error) { return rt.execCode(ctx, id) },
		func(ctx context.Context, height, width uint) error {
			return rt.Engine.ContainerExecResize(ctx, id, container.ResizeOptions{Height: height, Width: width})
		}), nil
}

// ExitCode returns the exit code of a finished exec.
func (e *Exec) ExitCode(ctx context.Context) (int, error) { return e.exitCode(ctx) }

// Resize sets an exec's terminal size.
func (e *Exec) Resize(ctx context.Context, height, width uint) error {
	if e.resize == nil {
		return nil
	}
	return e.resize(ctx, height, width)
}

// execCode returns the exit code of a finished Engine exec.
func (rt *Runtime) execCode(ctx context.Context, id string) (int, error) {
	in, err := rt.Engine.ContainerExecInspect(ctx, id)
	if err != nil {
		return 0, failed("cannot inspect the exec: %v", err)
	}
	if in.Running {
		return 0, fmt.Errorf("cannot read the exit code: exec %s still runs", id)
	}
	return in.ExitCode, nil
}
