package docker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
)

// flagEngine is an Engine of a sandbox's primary and one service whose
// paused flags it keeps, and whose pause and unpause answers can be set: a
// stale flag's answer for the first calls, or a failure.
type flagEngine struct {
	client.APIClient
	mu     sync.Mutex
	state  map[string]string // container ID → running or paused
	stale  int               // the next calls answer as a stale flag would
	broken string            // a container whose pause fails
	calls  []string
}

func (e *flagEngine) ContainerList(context.Context, container.ListOptions) ([]container.Summary, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return []container.Summary{
		{ID: "p", State: e.state["p"], Labels: map[string]string{backend.LabelRole: "primary"}},
		{ID: "s", State: e.state["s"], Labels: map[string]string{backend.LabelRole: "service"}},
	}, nil
}

func (e *flagEngine) set(id, verb, to, staleMsg string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, verb+" "+id)
	if e.stale > 0 {
		e.stale--
		return errors.New("Error response from daemon: Container " + id + staleMsg)
	}
	if id == e.broken && verb == "pause" {
		return errors.New("Error response from daemon: cannot pause: device busy")
	}
	e.state[id] = to
	return nil
}

func (e *flagEngine) ContainerPause(_ context.Context, id string) error {
	return e.set(id, "pause", statePaused, " is already paused")
}

func (e *flagEngine) ContainerUnpause(_ context.Context, id string) error {
	return e.set(id, "unpause", stateRunning, " is not paused")
}

// TestFreezerStaleFlag: an Engine answering as a stale paused flag makes
// (Engine 20.10's late containerd event) is asked again, and the sandbox ends
// frozen or thawed; a pause that fails for another reason thaws what it
// froze and says why.
func TestFreezerStaleFlag(t *testing.T) {
	ctx := context.Background()
	e := &flagEngine{state: map[string]string{"p": stateRunning, "s": stateRunning}, stale: 2}
	f := freezer{engine: e}
	if err := f.pause(ctx, "sb"); err != nil {
		t.Fatalf("a pause that met a stale flag twice: %v", err)
	}
	if e.state["p"] != statePaused || e.state["s"] != statePaused {
		t.Fatalf("after the pause: %v (calls %v)", e.state, e.calls)
	}
	e.stale = 1
	if err := f.unpause(ctx, "sb"); err != nil {
		t.Fatalf("an unpause that met a stale flag: %v", err)
	}
	if e.state["p"] != stateRunning || e.state["s"] != stateRunning {
		t.Fatalf("after the unpause: %v (calls %v)", e.state, e.calls)
	}

	// Always stale: given up after a few tries, thawed, with the Engine's words.
	e.stale = 100
	err := f.pause(ctx, "sb")
	if err == nil || !strings.Contains(err.Error(), "cannot pause sandbox sb") || !strings.Contains(err.Error(), "already paused") {
		t.Errorf("a pause the Engine never takes: %v", err)
	}
	e.stale = 0

	e.broken = "s"
	err = f.pause(ctx, "sb")
	if err == nil || !strings.Contains(err.Error(), "device busy") {
		t.Fatalf("a pause of a service that fails: %v", err)
	}
	if e.state["p"] != stateRunning || e.state["s"] != stateRunning {
		t.Errorf("after a failed pause: %v, want nothing left frozen", e.state)
	}
}
