package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/test/testenv"
)

// orderingEngine is the real Engine with its archive calls and removals seen
// in order: the first archive call is held until released, and an archive call
// or removal that overlaps the other is counted. (The Engine's own window, an
// archive call that starts while a removal deletes the layer, is too narrow to
// hit on demand: 1 removal in about 30 under a loop of reads.)
type orderingEngine struct {
	client.APIClient
	mu       sync.Mutex
	archives int // in flight
	removing bool
	overlaps []string
	held     chan struct{} // closed when the first archive call is held
	release  chan struct{}
	held1    bool
}

func (e *orderingEngine) begin(what string) {
	e.mu.Lock()
	e.archives++
	if e.removing {
		e.overlaps = append(e.overlaps, what+" began during a removal")
	}
	first := !e.held1
	e.held1 = true
	e.mu.Unlock()
	if first {
		close(e.held)
		<-e.release
	}
}

func (e *orderingEngine) end() { e.mu.Lock(); e.archives--; e.mu.Unlock() }

func (e *orderingEngine) CopyFromContainer(ctx context.Context, id, p string) (io.ReadCloser, container.PathStat, error) {
	e.begin("a read of " + p)
	defer e.end()
	return e.APIClient.CopyFromContainer(ctx, id, p)
}

func (e *orderingEngine) ContainerStatPath(ctx context.Context, id, p string) (container.PathStat, error) {
	e.begin("a stat of " + p)
	defer e.end()
	return e.APIClient.ContainerStatPath(ctx, id, p)
}

func (e *orderingEngine) ContainerRemove(ctx context.Context, id string, o container.RemoveOptions) error {
	e.mu.Lock()
	if e.archives > 0 {
		e.overlaps = append(e.overlaps, "a removal began during an archive call")
	}
	e.removing = true
	e.mu.Unlock()
	defer func() { e.mu.Lock(); e.removing = false; e.mu.Unlock() }()
	return e.APIClient.ContainerRemove(ctx, id, o)
}

// TestRemoveSparesBoundFiles removes a sandbox whose files are being read
// through the archive API. The Engine (20.10) mounts a container's binds on
// its host for each archive call, and a removal that runs into one deletes
// the bound directory's files through it: once, the user's project. So a
// removal waits for the archive calls in flight, no archive call starts once
// a removal has, and the bound files stay.
func TestRemoveSparesBoundFiles(t *testing.T) {
	t.Parallel()
	cli := testenv.Client(t)
	ctx := testContext(t, 2*time.Minute)
	img := testenv.BusyboxImage(t)
	dir := t.TempDir()
	keep := filepath.Join(dir, "sandbox.toml")
	if err := os.WriteFile(keep, []byte("[sandbox]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("removal-%d", os.Getpid())
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: []string{"sleep", "300"}, Labels: map[string]string{backend.LabelSandbox: id}},
		&container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeBind, Source: dir, Target: "/work"}}}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) })
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	eng := &orderingEngine{APIClient: cli, held: make(chan struct{}), release: make(chan struct{})}
	rt := &Runtime{Engine: eng}

	// A read of the bound file, held on its way to the Engine.
	read := make(chan error, 1)
	go func() {
		b, _, err := rt.ReadFile(ctx, c.ID, "/work/sandbox.toml", 0, 64)
		if err == nil && string(b) != "[sandbox]\n" {
			err = fmt.Errorf("read %q", b)
		}
		read <- err
	}()
	<-eng.held
	removed := make(chan error, 1)
	go func() { removed <- rt.RemoveContainers(ctx, id) }()
	// The removal has begun: it waits (its guard counts it), or (unguarded)
	// it has reached the Engine.
	testenv.Eventually(t, 30*time.Second, "the removal to begin", func() bool {
		archiveGuard.mu.Lock()
		u := archiveGuard.m[c.ID]
		waiting := u != nil && u.removals > 0
		archiveGuard.mu.Unlock()
		eng.mu.Lock()
		defer eng.mu.Unlock()
		return waiting || eng.removing || len(eng.overlaps) > 0
	})
	// An archive call asked now does not reach the Engine.
	if _, err := statPath(ctx, rt.Engine, c.ID, "/work"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("a stat during the removal: %v, want an error wrapping ErrNotFound", err)
	}
	close(eng.release)
	if err := <-read; err != nil {
		t.Errorf("the read begun before the removal: %v", err)
	}
	if err := <-removed; err != nil {
		t.Fatalf("RemoveContainers: %v", err)
	}
	eng.mu.Lock()
	for _, o := range eng.overlaps {
		t.Errorf("%s", o)
	}
	eng.mu.Unlock()
	if _, err := cli.ContainerInspect(ctx, c.ID); err == nil {
		t.Errorf("the container is still there after RemoveContainers")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the bound directory lost its file in the removal: %v", err)
	}
	archiveGuard.mu.Lock()
	if u := archiveGuard.m[c.ID]; u != nil {
		t.Errorf("the guard still holds the removed container: %+v", *u)
	}
	archiveGuard.mu.Unlock()
}
