package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
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
	return execChannel{engine: rt.Engine}.ExecIn(ctx, containerID, cmd, stdin, stdout, stderr)
}

// execChannel is the Engine's exec API as the channel to a running sandbox
// (a backend.Execer): what delivers values and follows files.
type execChannel struct {
	engine client.APIClient
}

// execOpenTries bounds the tries of an exec's create and attach: an Engine
// under load sometimes drops the connection of one (the client says
// "unexpected EOF"), and an exec not yet attached has not started, so making
// another runs the command once all the same.
const execOpenTries = 3

// ExecIn runs cmd in a container through the Engine's exec API.
func (c execChannel) ExecIn(ctx context.Context, containerID string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var resp container.ExecCreateResponse
	var hj types.HijackedResponse
	var err error
	for try := 1; ; try++ {
		resp, err = c.engine.ContainerExecCreate(ctx, containerID, container.ExecOptions{
			Cmd: cmd, AttachStdin: stdin != nil, AttachStdout: stdout != nil, AttachStderr: stderr != nil,
		})
		attached := false
		if err == nil {
			hj, err = c.engine.ContainerExecAttach(ctx, resp.ID, container.ExecAttachOptions{})
			attached = true
		}
		if err == nil {
			break
		}
		if try == execOpenTries || ctx.Err() != nil || !droppedConn(err) || (attached && c.mayHaveStarted(ctx, resp.ID)) {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Duration(try) * 20 * time.Millisecond):
		}
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
	return c.exitCode(context.WithoutCancel(ctx), resp.ID)
}

// droppedConn says whether err is the Engine's connection dropped mid-answer.
func droppedConn(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || strings.HasSuffix(err.Error(), "unexpected EOF")
}

// mayHaveStarted says whether the Engine may have started exec id (its
// attach, which starts it, failed): it runs, ran, or cannot be asked.
func (c execChannel) mayHaveStarted(ctx context.Context, id string) bool {
	in, err := c.engine.ContainerExecInspect(ctx, id)
	return err != nil || in.Running || in.Pid != 0 || in.ExitCode != 0
}

// exitCode waits for a finished exec's exit code (the Engine may report it
// a moment after the exec's output ended).
func (c execChannel) exitCode(ctx context.Context, execID string) (int, error) {
	wait := time.Millisecond
	for deadline := time.Now().Add(10 * time.Second); ; {
		in, err := c.engine.ContainerExecInspect(ctx, execID)
		if err != nil {
			return 0, err
		}
		if !in.Running {
			return in.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("exec %s still runs", execID)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}
