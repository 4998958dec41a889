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
	"github.com/docker/docker/client"

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

// resetStatus empties the status stream of a stopped container before it starts
// again, so a follower never reads the previous run's lines. The file is replaced,
// whatever a process in the sandbox left there (a FIFO, a symlink, a huge file),
// and owned by the container's user.
func resetStatus(ctx context.Context, eng client.APIClient, containerID string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: path.Base(supervisor.StatusFile), Mode: 0o644, ModTime: time.Now(), Typeflag: tar.TypeReg})
	_ = tw.Close()
	err := copyTo(ctx, eng, containerID, supervisor.StateDir, &buf, container.CopyToContainerOptions{AllowOverwriteDirWithFile: true, CopyUIDGID: true})
	if err != nil {
		return failed("cannot reset the sandbox's status stream: %v", err)
	}
	return nil
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
	if from == 0 {
		if rc := rt.takeEarly(ctx, containerID); rc != nil {
			return rc, nil
		}
	}
	return backend.TailFile(ctx, rt, containerID, supervisor.StatusFile, from, true, backend.StatusReadIn)
}

// ReadFile reads at most limit bytes of a regular file of a container, running or
// stopped, from a byte offset, through the Engine's archive API. It reports the
// file's whole size too.
func (rt *Runtime) ReadFile(ctx context.Context, containerID, file string, from, limit int64) ([]byte, int64, error) {
	rc, _, err := copyFrom(ctx, rt.Engine, containerID, file)
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
	rc, _, err := copyFrom(ctx, rt.Engine, containerID, file)
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
