package sandbox

import (
	"context"

	"github.com/airlock-dev/airlock/manifest"
)

// build builds [sandbox.build] through the Engine API and returns the image reference.
func (rt *Runtime) build(ctx context.Context, r *manifest.Resolved) (string, error) {
	return "", failed("[sandbox.build] is not supported yet")
}
