package docker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
)

// attachInitEngine is Podman as its Docker-compatible API behaves on an attach to
// a created container: it prepares the container then (runtime, network, ports),
// and a failure there reaches the Docker client as "received 409" without its
// text; a start says why.
type attachInitEngine struct {
	versionEngine
	startErr error
	started  bool
	killed   bool
}

func (e *attachInitEngine) ContainerAttach(context.Context, string, container.AttachOptions) (types.HijackedResponse, error) {
	return types.HijackedResponse{}, errors.New("unable to upgrade to tcp, received 409")
}

func (e *attachInitEngine) ContainerStart(context.Context, string, container.StartOptions) error {
	e.started = true
	return e.startErr
}

func (e *attachInitEngine) ContainerKill(context.Context, string, string) error {
	e.killed = true
	return nil
}

// TestAttachFailureOnPodmanSaysWhy: when Podman cannot prepare the primary for
// the attach (a host port in use), the error is the start's (PortInUseError,
// naming the port), not "received 409".
func TestAttachFailureOnPodmanSaysWhy(t *testing.T) {
	podman := types.Version{Components: []types.ComponentVersion{{Name: "Podman Engine", Version: "4.3.1"}}}
	eng := &attachInitEngine{versionEngine: versionEngine{v: podman},
		startErr: errors.New("Error response from daemon: cannot listen on the TCP port: listen tcp4 127.0.0.1:47001: bind: address already in use")}
	rt := &Runtime{Engine: eng}
	m := &manifest.Resolved{}
	m.Sandbox.Ports = []string{"127.0.0.1:47001:80"}
	sb := &backend.Sandbox{PrimaryID: "c1", Own: &sandboxState{manifest: m}}
	_, err := rt.Attach(context.Background(), sb, backend.Streams{})
	var pe *backend.PortInUseError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "127.0.0.1:47001") {
		t.Fatalf("Attach error = %v; want a PortInUseError naming 127.0.0.1:47001", err)
	}

	// A start that succeeds after all is undone: the attach's error stands.
	eng = &attachInitEngine{versionEngine: versionEngine{v: podman}}
	rt = &Runtime{Engine: eng}
	_, err = rt.Attach(context.Background(), &backend.Sandbox{PrimaryID: "c1", Own: &sandboxState{manifest: m}}, backend.Streams{})
	if err == nil || !strings.Contains(err.Error(), "cannot attach to the sandbox") || !eng.killed {
		t.Errorf("Attach error = %v (killed %v); want the attach's error and the container killed", err, eng.killed)
	}

	// Docker: no start.
	eng = &attachInitEngine{versionEngine: versionEngine{v: types.Version{Components: []types.ComponentVersion{{Name: "Engine"}}}}}
	rt = &Runtime{Engine: eng}
	if _, err = rt.Attach(context.Background(), &backend.Sandbox{PrimaryID: "c1", Own: &sandboxState{manifest: m}}, backend.Streams{}); err == nil || eng.started {
		t.Errorf("Attach on Docker = %v (started %v); want the attach's error and no start", err, eng.started)
	}
}
