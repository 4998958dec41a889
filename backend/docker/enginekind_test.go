package docker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/client"
)

// versionEngine answers ServerVersion (counting the calls); every other call panics.
type versionEngine struct {
	client.APIClient
	v     types.Version
	err   error
	calls int
}

func (e *versionEngine) ServerVersion(context.Context) (types.Version, error) {
	e.calls++
	return e.v, e.err
}

// TestPodmanEngine: Podman's Docker-compatible service is known by its "Podman
// Engine" component, asked once per runtime; Docker is not Podman.
func TestPodmanEngine(t *testing.T) {
	podman := &versionEngine{v: types.Version{Version: "4.3.1", Components: []types.ComponentVersion{
		{Name: "Podman Engine", Version: "4.3.1"}, {Name: "Conmon", Version: "2.1.6"}}}}
	rt := &Runtime{Engine: podman}
	for range 2 {
		if got, err := rt.kind().podman(context.Background()); err != nil || got != "Podman 4.3.1" {
			t.Errorf("podman() = %q, %v; want Podman 4.3.1", got, err)
		}
	}
	if podman.calls != 1 {
		t.Errorf("ServerVersion asked %d times; want once", podman.calls)
	}
	docker := &Runtime{Engine: &versionEngine{v: types.Version{Version: "20.10.24", Components: []types.ComponentVersion{{Name: "Engine", Version: "20.10.24"}}}}}
	if got, err := docker.kind().podman(context.Background()); err != nil || got != "" {
		t.Errorf("podman() of Docker = %q, %v; want empty", got, err)
	}
	broken := &Runtime{Engine: &versionEngine{err: errors.New("down")}}
	if _, err := broken.kind().podman(context.Background()); err == nil {
		t.Error("podman() of an Engine that does not answer: want an error")
	}
}

// TestEgressRefusedOnPodman: [sandbox.egress] needs what Podman's networks lack;
// the error names the Engine and what it lacks.
func TestEgressRefusedOnPodman(t *testing.T) {
	rt := &Runtime{Engine: &versionEngine{v: types.Version{Components: []types.ComponentVersion{{Name: "Podman Engine", Version: "4.3.1"}}}}}
	err := rt.kind().egressSupported(context.Background())
	if err == nil {
		t.Fatal("want egress refused on Podman")
	}
	for _, want := range []string{"cannot apply sandbox.egress", "the Engine (Podman 4.3.1) does not support", "inhibit_ipv4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	docker := &Runtime{Engine: &versionEngine{v: types.Version{Components: []types.ComponentVersion{{Name: "Engine", Version: "20.10.24"}}}}}
	if err := docker.kind().egressSupported(context.Background()); err != nil {
		t.Errorf("egress on Docker: %v", err)
	}
}
