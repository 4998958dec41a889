package control

import (
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/engine"
)

// endpointFromWire is the endpoint a request names (nil for none), normalised
// (engine.Normalize): a cluster packed in Host, as earlier CLIs send it, is
// read into the typed form.
func endpointFromWire(e *client.Engine) (*engine.Endpoint, error) {
	if e == nil {
		return nil, nil
	}
	n, err := engine.FromWire(e)
	if err != nil {
		return nil, errorf(ErrInvalidRequest, "engine: %v", err)
	}
	return &n, nil
}

// wireEngine is the API's view of an endpoint.
func wireEngine(ep engine.Endpoint) *client.Engine { return engine.ToWire(ep) }
