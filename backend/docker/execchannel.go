package docker

import (
	"context"
	"io"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/airlock-dev/airlock/backend"
)

// The Docker Engine's side of the host's end of the channel to a running sandbox
// (backend.Execer, backend.DeliverValues, backend.TailFile): its execs, through
// the Engine's exec API.

// TailLog is TailLog on the Docker Engine.
func (rt *Runtime) TailLog(ctx context.Context, containerID, file string, lines int, follow bool) (io.ReadCloser, error) {
	return backend.TailLog(ctx, rt, containerID, file, lines, follow)
}

// ExecIn runs cmd in a container through the Engine's exec API (Execer).
func (rt *Runtime) ExecIn(ctx context.Context, containerID string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	resp, err := rt.Engine.ContainerExecCreate(ctx, containerID, container.ExecOptions{
		Cmd: cmd, AttachStdin: stdin != nil, AttachStdout: stdout != nil, AttachStderr: stderr != nil,
	})
	if err != nil {
		return 0, err
	}
	hj, err := rt.Engine.ContainerExecAttach(ctx, resp.ID, container.ExecAttachOptions{})
	if err != nil {
		return 0, err
	}
	defer hj.Close()
	stop := context.AfterFunc(ctx, func() { hj.Close() })
	defer stop()
	if stdin != nil {
		go func() {
			_, _ = io.Copy(hj.Conn, stdin)
			_ = hj.CloseWrite()
		}()
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if _, err := stdcopy.StdCopy(stdout, stderr, hj.Reader); err != nil && ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return rt.execExitCode(context.WithoutCancel(ctx), resp.ID)
}
