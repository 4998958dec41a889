//go:build nokube

package cli

import (
	"errors"

	"github.com/airlock-dev/airlock/engine"
)

// This build has no Kubernetes backend.
var errNoKube = errors.New("this airlock binary was built without the Kubernetes backend (build tag nokube)")

func (a *app) kubeEndpoint(*backendChoice) (engine.Endpoint, error) {
	return engine.Endpoint{}, withCode(ExitAirlock, errNoKube)
}
