package sandbox

import (
	"context"

	"github.com/airlock-dev/airlock/manifest"
)

// createServices creates one container per service on the sandbox network.
func (rt *Runtime) createServices(ctx context.Context, sb *Sandbox, r *manifest.Resolved, labels map[string]string) error {
	if len(r.Services) > 0 {
		return failed("services are not supported yet")
	}
	return nil
}

// startServices starts the service containers and waits for the required ones.
func (rt *Runtime) startServices(ctx context.Context, sb *Sandbox) error { return nil }
