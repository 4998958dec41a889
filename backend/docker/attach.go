package docker

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/airlock-dev/airlock/backend"
)

// Attach connects streams to the primary container. Attach before Start so no output
// is lost. The returned channel yields once the output has been copied to the end.
// Without a TTY, stdout and stderr stay apart.
func (rt *Runtime) Attach(ctx context.Context, sb *backend.Sandbox, s backend.Streams) (<-chan error, error) {
	ownState(sb).claimMu.Lock()
	defer ownState(sb).claimMu.Unlock()
	parked := ownState(sb).parked && ownState(sb).claimConn == nil
	resp, err := rt.Engine.ContainerAttach(ctx, sb.PrimaryID, container.AttachOptions{
		Stream: true, Stdin: s.Stdin != nil || parked, Stdout: true, Stderr: true,
	})
	if err != nil {
		return nil, attachFailed(ctx, rt.kind(), sb, err)
	}
	if parked {
		// Its claim goes first on this stdin (Claim), then the client's.
		ownState(sb).claimConn, ownState(sb).claimStdin = &resp, s.Stdin
		s.Stdin = nil
	}
	return pump(resp, sb.TTY, s), nil
}

// attachFailed is the error of a failed attach to the primary. Podman prepares a
// created container when it is attached to (its runtime, network and ports),
// and a failure there reaches the Docker client as "received 409" without the
// text saying why: on Podman a start of the container says it (a host port in
// use: a PortInUseError, as from Start). A start that succeeds after all is
// undone, and the attach's error stands.
func attachFailed(ctx context.Context, k engineKind, sb *backend.Sandbox, err error) error {
	if p, perr := k.podman(ctx); perr == nil && p != "" && strings.Contains(err.Error(), "received 409") {
		serr := k.engine.ContainerStart(ctx, sb.PrimaryID, container.StartOptions{})
		if serr == nil {
			_ = k.engine.ContainerKill(context.WithoutCancel(ctx), sb.PrimaryID, "SIGKILL")
		} else {
			var ports []string
			if ownState(sb).manifest != nil {
				ports = ownState(sb).manifest.Sandbox.Ports
			}
			if pe := portInUse(serr, ports); pe != nil {
				return &backend.Error{Code: 125, Err: pe}
			}
			return failed("cannot start the sandbox container: %v", serr)
		}
	}
	return failed("cannot attach to the sandbox: %v", err)
}

// pump copies the hijacked connection's output to the streams, and stdin to it
// (closing its write side at EOF so the process sees end of input).
func pump(resp types.HijackedResponse, tty bool, s backend.Streams) <-chan error {
	done := make(chan error, 1)
	if s.Stdin != nil {
		go func() {
			_, _ = io.Copy(resp.Conn, s.Stdin)
			_ = resp.CloseWrite()
		}()
	}
	go func() {
		var err error
		if tty {
			_, err = io.Copy(s.Stdout, resp.Reader)
		} else {
			_, err = stdcopy.StdCopy(s.Stdout, s.Stderr, resp.Reader)
		}
		resp.Close()
		done <- err
	}()
	return done
}

// Resize sets the primary's terminal size.
func (rt *Runtime) Resize(ctx context.Context, sb *backend.Sandbox, height, width uint) error {
	return rt.Engine.ContainerResize(ctx, sb.PrimaryID, container.ResizeOptions{Height: height, Width: width})
}

// Kill sends a signal to the primary's PID 1, the supervisor, which forwards it to
// the main command.
func (rt *Runtime) Kill(ctx context.Context, sb *backend.Sandbox, signal string) error {
	return rt.Engine.ContainerKill(ctx, sb.PrimaryID, signal)
}

// FollowOutput copies the primary's output from its start (stdout and stderr
// apart; on a TTY all of it to stdout) until the container stops or ctx ends:
// a client that attaches again after losing its stream.
func (rt *Runtime) FollowOutput(ctx context.Context, sb *backend.Sandbox, stdout, stderr io.Writer) <-chan error {
	done := make(chan error, 1)
	rc, err := rt.Engine.ContainerLogs(ctx, sb.PrimaryID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		done <- failed("cannot read the sandbox's output: %v", err)
		return done
	}
	go func() {
		defer rc.Close()
		var err error
		if sb.TTY {
			_, err = io.Copy(stdout, rc)
		} else {
			_, err = stdcopy.StdCopy(stdout, stderr, rc)
		}
		done <- err
	}()
	return done
}

// FollowStderr copies the primary's stderr written from since on (the supervisor's
// shutdown lines, when the sandbox is stopped) to w until the container stops or
// ctx ends.
func (rt *Runtime) FollowStderr(ctx context.Context, sb *backend.Sandbox, since time.Time, w io.Writer) <-chan error {
	done := make(chan error, 1)
	rc, err := rt.Engine.ContainerLogs(ctx, sb.PrimaryID, container.LogsOptions{
		ShowStderr: true, Follow: true, Since: fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond()),
	})
	if err != nil {
		done <- err
		return done
	}
	go func() {
		defer rc.Close()
		var err error
		if sb.TTY {
			_, err = io.Copy(w, rc)
		} else {
			_, err = stdcopy.StdCopy(io.Discard, w, rc)
		}
		done <- err
	}()
	return done
}
