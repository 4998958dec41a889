package docker

import (
	"context"

	"github.com/docker/docker/api/types/network"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/backend/docker/sharednet"
	"github.com/airlock-dev/airlock/manifest"
)

// The shared network and its shards (package sharednet), under the names the
// rest of airlock knows them by.
const (
	SharedNetwork           = sharednet.SharedNetwork
	LabelShared             = sharednet.LabelShared
	LabelShard              = sharednet.LabelShard
	DefaultSharedNetworkMax = sharednet.DefaultSharedNetworkMax
	ShardRecount            = sharednet.ShardRecount
)

// ShardName is the name of shard n (1, 2, …) of the shared network.
func ShardName(n int) string { return sharednet.ShardName(n) }

// shards are the shards of the shared network on the runtime's Engine.
func (rt *Runtime) shards() *sharednet.Shards {
	return &sharednet.Shards{Engine: rt.Engine, Max: rt.SharedNetworkMax, State: &rt.shared}
}

// bridgeNetwork puts a sandbox with sandbox.network = "bridge" on its network:
// a network of its own when it has services (they reach each other and the
// primary by name), else a shard of the shared network. reserved ends a
// shard's reservation once the sandbox's container exists (or was not made).
// On Podman it refuses (bridgeSupported).
func bridgeNetwork(ctx context.Context, k engineKind, shards *sharednet.Shards, sb *backend.Sandbox, r *manifest.Resolved, labels map[string]string) (reserved func(), err error) {
	if err := k.bridgeSupported(ctx); err != nil {
		return nil, err
	}
	if len(r.Services) > 0 {
		nl := copyLabels(labels, backend.LabelRole, "network")
		if _, err := k.engine.NetworkCreate(ctx, sb.Name, network.CreateOptions{Driver: "bridge", Labels: nl}); err != nil {
			return nil, failed("cannot create network %s: %v", sb.Name, err)
		}
		sb.Network = sb.Name
		return func() {}, nil
	}
	name, id, reserved, err := shards.Pick(ctx)
	if err != nil {
		return nil, err
	}
	sb.Network, ownState(sb).shard = id, name
	return reserved, nil
}
