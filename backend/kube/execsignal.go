package kube

import (
	"context"

	"github.com/airlock-dev/airlock/backend"
)

// SignalExec signals an API exec's process group (backend.SignalExec), as on
// Docker: Kubernetes has no API to signal an exec's process.
func (rt *Runtime) SignalExec(ctx context.Context, pod, execID, signal string) (bool, error) {
	return backend.SignalExec(ctx, rt, pod, execID, signal)
}
