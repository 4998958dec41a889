package docker

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
)

// The Engine's archive API (copy from, copy into, stat a path) mounts the
// container's filesystem and every one of its mounts, binds included, on the
// Engine's host for the length of the call. A removal does not wait for that:
// once the Engine has marked the container dead it deletes the container's
// layer without the container's lock, and an archive call that starts in that
// window has the layer's directory hold live binds while it is deleted. The
// deletion goes through them: on Engine 20.10 it emptied the project directory
// bound into a sandbox whose status was being read while it was removed.
//
// So in this process no archive call on a container starts once its removal
// has, and a removal waits for the archive calls in flight (a read's until its
// stream is closed). Within them the Engine's own container lock orders the
// rest. Containers are named by their full IDs (what the Engine's create and
// list answer).

// archiveGuard is the archive calls in flight and the removals under way, per
// container.
var archiveGuard = struct {
	mu sync.Mutex
	m  map[string]*containerUse
}{m: map[string]*containerUse{}}

type containerUse struct {
	archives int           // archive calls in flight
	removals int           // removals begun: while any, no archive call starts
	idle     chan struct{} // closed when archives drops to 0 with a removal waiting
}

// useOf is containerID's entry, made when it has none (archiveGuard.mu held).
func useOf(containerID string) *containerUse {
	u := archiveGuard.m[containerID]
	if u == nil {
		u = &containerUse{}
		archiveGuard.m[containerID] = u
	}
	return u
}

// forgetIfIdle drops u, containerID's entry, once nothing uses it
// (archiveGuard.mu held).
func forgetIfIdle(u *containerUse, containerID string) {
	if u.archives == 0 && u.removals == 0 {
		delete(archiveGuard.m, containerID)
	}
}

// errRemoving is what an archive call on a container being removed returns.
func errRemoving(containerID string) error {
	return fmt.Errorf("%w: its container %s is being removed", backend.ErrNotFound, containerID)
}

// beginArchive counts an archive call on containerID in flight; call the
// function it returns once the call (a read's stream included) is over.
func beginArchive(containerID string) (func(), error) {
	archiveGuard.mu.Lock()
	defer archiveGuard.mu.Unlock()
	u := useOf(containerID)
	if u.removals > 0 {
		return nil, errRemoving(containerID)
	}
	u.archives++
	var once sync.Once
	return func() {
		once.Do(func() {
			archiveGuard.mu.Lock()
			defer archiveGuard.mu.Unlock()
			u.archives--
			if u.archives > 0 {
				return
			}
			if u.idle != nil {
				close(u.idle)
				u.idle = nil
			}
			forgetIfIdle(u, containerID)
		})
	}, nil
}

// beginRemoval bars new archive calls on containerID and waits for those in
// flight; call the function it returns once the removal is over (done or
// failed: a later one is guarded again).
func beginRemoval(ctx context.Context, containerID string) (func(), error) {
	archiveGuard.mu.Lock()
	u := useOf(containerID)
	u.removals++
	var idle chan struct{}
	if u.archives > 0 {
		if u.idle == nil {
			u.idle = make(chan struct{})
		}
		idle = u.idle
	}
	archiveGuard.mu.Unlock()
	end := func() {
		archiveGuard.mu.Lock()
		defer archiveGuard.mu.Unlock()
		u.removals--
		forgetIfIdle(u, containerID)
	}
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
			end()
			return nil, fmt.Errorf("cannot remove container %s while its files are being copied: %w", containerID, ctx.Err())
		}
	}
	return end, nil
}

// removeContainer removes a container once no archive call on it is in
// flight, and lets none start meanwhile.
func removeContainer(ctx context.Context, eng client.APIClient, containerID string, opts container.RemoveOptions) error {
	end, err := beginRemoval(ctx, containerID)
	if err != nil {
		return err
	}
	defer end()
	return eng.ContainerRemove(ctx, containerID, opts)
}

// copyFrom is the Engine's CopyFromContainer, guarded until the stream is
// closed.
func copyFrom(ctx context.Context, eng client.APIClient, containerID, p string) (io.ReadCloser, container.PathStat, error) {
	done, err := beginArchive(containerID)
	if err != nil {
		return nil, container.PathStat{}, err
	}
	rc, st, err := eng.CopyFromContainer(ctx, containerID, p)
	if err != nil {
		done()
		return nil, st, err
	}
	return &guardedStream{ReadCloser: rc, done: done}, st, nil
}

// copyTo is the Engine's CopyToContainer, guarded.
func copyTo(ctx context.Context, eng client.APIClient, containerID, dst string, r io.Reader, opts container.CopyToContainerOptions) error {
	done, err := beginArchive(containerID)
	if err != nil {
		return err
	}
	defer done()
	return eng.CopyToContainer(ctx, containerID, dst, r, opts)
}

// statPath is the Engine's ContainerStatPath, guarded.
func statPath(ctx context.Context, eng client.APIClient, containerID, p string) (container.PathStat, error) {
	done, err := beginArchive(containerID)
	if err != nil {
		return container.PathStat{}, err
	}
	defer done()
	return eng.ContainerStatPath(ctx, containerID, p)
}

// guardedStream ends its archive call's guard when closed.
type guardedStream struct {
	io.ReadCloser
	done func()
}

func (s *guardedStream) Close() error {
	err := s.ReadCloser.Close()
	s.done()
	return err
}
