package sandbox

import (
	"context"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
)

// A sandbox without services (and so with no one to reach by name) joins one
// long-lived bridge network per Engine instead of a network of its own: creating
// and removing a network costs more than a whole `docker run`. Inter-container
// communication is disabled on it (com.docker.network.bridge.enable_icc=false), so
// sandboxes on it cannot reach each other, only the outside. It is made on first
// use, labelled as shared (never with a sandbox ID, so no sandbox's removal takes
// it), and left in place; `airlock prune` may remove it when nothing uses it.

const (
	// SharedNetwork is the name of the shared network on every Engine.
	SharedNetwork = "airlock-shared"
	// LabelShared marks the shared network.
	LabelShared = "dev.airlock.shared"
)

// sharedNet remembers that the shared network exists on this runtime's Engine.
type sharedNet struct {
	mu    sync.Mutex
	known bool
}

// sharedNetwork returns the shared network's name, creating it when missing
// (again, with recheck, when it disappeared).
func (rt *Runtime) sharedNetwork(ctx context.Context, recheck bool) (string, error) {
	rt.shared.mu.Lock()
	defer rt.shared.mu.Unlock()
	if rt.shared.known && !recheck {
		return SharedNetwork, nil
	}
	if _, err := rt.Engine.NetworkInspect(ctx, SharedNetwork, network.InspectOptions{}); err == nil {
		rt.shared.known = true
		return SharedNetwork, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", failed("cannot inspect network %s: %v", SharedNetwork, err)
	}
	_, err := rt.Engine.NetworkCreate(ctx, SharedNetwork, network.CreateOptions{
		Driver:  "bridge",
		Options: map[string]string{"com.docker.network.bridge.enable_icc": "false"},
		Labels:  map[string]string{LabelShared: "true"},
	})
	if err != nil && !cerrdefs.IsConflict(err) {
		// Another process may have made it meanwhile; anything else fails.
		if _, ierr := rt.Engine.NetworkInspect(ctx, SharedNetwork, network.InspectOptions{}); ierr != nil {
			return "", failed("cannot create network %s: %v", SharedNetwork, err)
		}
	}
	rt.shared.known = true
	return SharedNetwork, nil
}
