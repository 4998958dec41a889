package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/supervisor"
)

// The channel (design.md §7): everything between airlock and a sandbox travels through
// the Engine API, so a local socket, Docker Desktop, TCP+TLS and ssh Engines work the
// same and a process in the sandbox can never reach airlock's host state.
//   - the spec is uploaded into the created container (it holds no secret);
//   - secret values are delivered by a non-TTY exec of `supervise deliver` whose
//     stdin carries them to PID 1's socket on a tmpfs (DeliverValues, execchannel.go);
//   - the status stream and daemon logs stay in the container's state dir
//     (supervisor.StateDir) and are read by an exec of `supervise tail` while it
//     runs, and by archive download once it stopped (FollowFile, ReadFile).

// uploadState writes the spec and the sandbox user's empty state folder into a
// created container (for a sandbox user who could not make the folder itself).
func (rt *Runtime) uploadState(ctx context.Context, containerID string, b []byte, u sandboxUser) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	entries := []struct {
		name     string
		mode     int64
		uid, gid int
		data     []byte
		dir      bool
	}{
		{name: "airlock/", mode: 0o755, dir: true},
		{name: "airlock/spec.json", mode: 0o444, data: b},
		{name: "airlock/state/", mode: 0o755, uid: u.UID, gid: u.GID, dir: true},
		{name: "airlock/state/daemons/", mode: 0o755, uid: u.UID, gid: u.GID, dir: true},
		{name: "airlock/state/status.jsonl", mode: 0o644, uid: u.UID, gid: u.GID, data: []byte{}},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: now, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return failed("cannot write the sandbox state: %v", err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return failed("cannot write the sandbox state: %v", err)
		}
	}
	if err := tw.Close(); err != nil {
		return failed("cannot write the sandbox state: %v", err)
	}
	if err := rt.copyTo(ctx, containerID, "/", &buf, container.CopyToContainerOptions{AllowOverwriteDirWithFile: true}); err != nil {
		return failed("cannot upload the supervisor spec into the sandbox: %v", err)
	}
	return nil
}

// resetStatus empties the status stream of a stopped container before it starts
// again, so a follower never reads the previous run's lines. The file is replaced,
// whatever a process in the sandbox left there (a FIFO, a symlink, a huge file),
// and owned by the container's user.
func (rt *Runtime) resetStatus(ctx context.Context, containerID string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: path.Base(supervisor.StatusFile), Mode: 0o644, ModTime: time.Now(), Typeflag: tar.TypeReg})
	_ = tw.Close()
	err := rt.copyTo(ctx, containerID, supervisor.StateDir, &buf, container.CopyToContainerOptions{AllowOverwriteDirWithFile: true, CopyUIDGID: true})
	if err != nil {
		return failed("cannot reset the sandbox's status stream: %v", err)
	}
	return nil
}

// execExitCode waits for a finished exec's exit code (the Engine may report it
// a moment after the exec's output ended).
func (rt *Runtime) execExitCode(ctx context.Context, execID string) (int, error) {
	wait := time.Millisecond
	for deadline := time.Now().Add(10 * time.Second); ; {
		in, err := rt.Engine.ContainerExecInspect(ctx, execID)
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

// FollowFile streams a file of a running sandbox from a byte offset, and what is
// appended to it, through an exec of `supervise tail --follow`. The stream ends
// when the container stops, when ctx ends or when it is closed.
func (rt *Runtime) FollowFile(ctx context.Context, containerID, file string, from int64) (io.ReadCloser, error) {
	return backend.TailFile(ctx, rt, containerID, file, from, true, "")
}

// FollowStatus follows the supervisor's status stream from a byte offset; the
// follower reports its progress in the sandbox, so that the supervisor lets it read
// the stream's last lines before the container stops.
func (rt *Runtime) FollowStatus(ctx context.Context, containerID string, from int64) (io.ReadCloser, error) {
	return backend.TailFile(ctx, rt, containerID, supervisor.StatusFile, from, true, backend.StatusReadIn)
}

// ReadFile reads at most limit bytes of a regular file of a container, running or
// stopped, from a byte offset, through the Engine's archive API. It reports the
// file's whole size too.
func (rt *Runtime) ReadFile(ctx context.Context, containerID, file string, from, limit int64) ([]byte, int64, error) {
	rc, _, err := rt.copyFrom(ctx, containerID, file)
	if err != nil {
		return nil, 0, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil {
		return nil, 0, fmt.Errorf("cannot read %s: %w", file, err)
	}
	if h.Typeflag != tar.TypeReg {
		return nil, 0, fmt.Errorf("cannot read %s: %w", file, backend.ErrNotRegular)
	}
	if from > h.Size {
		from = 0 // it shrank: a new stream
	}
	if _, err := io.CopyN(io.Discard, tr, from); err != nil {
		return nil, h.Size, fmt.Errorf("cannot read %s: %w", file, err)
	}
	b, err := io.ReadAll(io.LimitReader(tr, limit))
	return b, h.Size, err
}

// CopyFile streams a regular file of a container (running or stopped) to w from a
// byte offset and returns the offset after it.
func (rt *Runtime) CopyFile(ctx context.Context, containerID, file string, from int64, w io.Writer) (int64, error) {
	rc, _, err := rt.copyFrom(ctx, containerID, file)
	if err != nil {
		return from, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil {
		return from, fmt.Errorf("cannot read %s: %w", file, err)
	}
	if h.Typeflag != tar.TypeReg {
		return from, fmt.Errorf("cannot read %s: %w", file, backend.ErrNotRegular)
	}
	if from > h.Size {
		from = 0
	}
	if _, err := io.CopyN(io.Discard, tr, from); err != nil {
		return from, err
	}
	n, err := io.Copy(w, tr)
	return from + n, err
}
