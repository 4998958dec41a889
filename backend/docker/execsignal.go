package docker

import (
	"context"

	"github.com/airlock-dev/airlock/backend"
)

// SignalExec signals an API exec's process group (backend.SignalExec).
func (rt *Runtime) SignalExec(ctx context.Context, containerID, execID, signal string) (bool, error) {
	return backend.SignalExec(ctx, rt, containerID, execID, signal)
}
