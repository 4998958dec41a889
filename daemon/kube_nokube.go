//go:build nokube

package cli

import (
	"context"
	"errors"

	"github.com/airlock-dev/airlock/control"
	"github.com/airlock-dev/airlock/engine"
)

// This build (the supervisor injected into sandboxes) has no Kubernetes backend.
var errNoKube = errors.New("this airlock binary was built without the Kubernetes backend (build tag nokube)")

func (a *app) kubeEndpoint(*backendChoice) (engine.Endpoint, error) {
	return engine.Endpoint{}, withCode(ExitAirlock, errNoKube)
}

func openBackend(context.Context, engine.Endpoint, string) (control.Backend, error) {
	return nil, errNoKube
}
