//go:build nokube

package daemon

import (
	"context"
	"errors"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/engine"
)

// This build has no Kubernetes backend.
var errNoKube = errors.New("this airlock binary was built without the Kubernetes backend (build tag nokube)")

func openBackend(context.Context, engine.Endpoint, string) (backend.Backend, error) {
	return nil, errNoKube
}
