//go:build !nokube

package daemon

import (
	"context"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/backend/kube"
	"github.com/airlock-dev/airlock/engine"
)

// The Kubernetes backend (package kube). A build with the tag nokube has none:
// client-go would add to every start of it.

// openBackend opens the Kubernetes backend a sandbox was created on.
func openBackend(ctx context.Context, ep engine.Endpoint, owner string) (backend.Backend, error) {
	cfg, err := kube.ConfigOf(ep)
	if err != nil {
		return nil, err
	}
	cfg.Owner = owner
	return kube.Open(ctx, cfg)
}
