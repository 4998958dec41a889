package sandbox

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/filters"
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

// sharedNet remembers the shared network's ID on this runtime's Engine.
type sharedNet struct {
	mu sync.Mutex
	id string
}

// sharedNetwork returns the shared network's ID, creating it when missing
// (again, with recheck, when it disappeared). Sandboxes join it by ID: two
// processes making it at once can leave two networks of that name (Engine 20.10's
// duplicate check is not atomic), and a name that matches two is ambiguous.
func (rt *Runtime) sharedNetwork(ctx context.Context, recheck bool) (string, error) {
	rt.shared.mu.Lock()
	defer rt.shared.mu.Unlock()
	if rt.shared.id != "" && !recheck {
		return rt.shared.id, nil
	}
	id, err := rt.findShared(ctx)
	if err != nil {
		return "", err
	}
	if id == "" {
		_, cerr := rt.Engine.NetworkCreate(ctx, SharedNetwork, network.CreateOptions{
			Driver:  "bridge",
			Options: map[string]string{"com.docker.network.bridge.enable_icc": "false"},
			Labels:  map[string]string{LabelShared: "true"},
		})
		// Another process may have made it meanwhile: look again either way.
		if id, err = rt.findShared(ctx); err != nil {
			return "", err
		}
		if id == "" {
			return "", failed("cannot create network %s: %v", SharedNetwork, cerr)
		}
	}
	rt.shared.id = id
	return id, nil
}

// findShared returns the ID of the network named SharedNetwork ("" when there is
// none). When there are several, it is the oldest (every process picks the same
// one), and the others that airlock made are removed where no container uses them
// (the Engine refuses to remove a network in use; a sandbox being created on one
// finds it gone and asks again).
func (rt *Runtime) findShared(ctx context.Context) (string, error) {
	list, err := rt.Engine.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", SharedNetwork))})
	if err != nil {
		return "", failed("cannot list networks named %s: %v", SharedNetwork, err)
	}
	list = slices.DeleteFunc(list, func(n network.Summary) bool { return n.Name != SharedNetwork })
	if len(list) == 0 {
		return "", nil
	}
	slices.SortFunc(list, func(a, b network.Summary) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	for _, n := range list[1:] {
		if n.Labels[LabelShared] == "true" {
			_ = rt.Engine.NetworkRemove(ctx, n.ID)
		}
	}
	return list[0].ID, nil
}
