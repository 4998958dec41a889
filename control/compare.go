package control

import (
	"context"
	"errors"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/manifest"
)

// CompareRequest asks whether a sandbox is what a manifest would make now on
// an Engine or cluster (nil: the daemon's own).
type CompareRequest struct {
	Manifest *manifest.Wire
	Secrets  map[string]string
	Engine   *engine.Endpoint
}

// Comparison says whether a sandbox is what a manifest would make now.
type Comparison struct {
	// Same: the sandbox is on that Engine, made from that manifest (and the
	// image it names now).
	Same bool
	// Found: the Engine holds the sandbox (else it is gone from it, or on
	// another one).
	Found bool
}

// Compare tells `up` whether sandbox id can be started again as it is or must
// be made anew: the plan hash a sandbox made now would carry (images built or
// pulled when missing) against the sandbox's.
func (s *Service) Compare(ctx context.Context, id string, req *CompareRequest) (Comparison, error) {
	if _, err := s.store.Get(id); err != nil {
		return Comparison{}, err
	}
	if req.Manifest == nil {
		return Comparison{}, errorf(ErrInvalidRequest, "manifest is required")
	}
	r, err := manifest.FromWire(*req.Manifest, req.Secrets)
	if err != nil {
		return Comparison{}, errorf(ErrConfig, "%v", err)
	}
	rt := s.rt
	if req.Engine != nil {
		rt = s.runtimeFor(*req.Engine)
	}
	hash, err := rt.PlanHashFor(ctx, r)
	if err != nil {
		return Comparison{}, err
	}
	info, err := rt.Get(ctx, id)
	if errors.Is(err, backend.ErrNotFound) {
		return Comparison{}, nil
	}
	if err != nil {
		return Comparison{}, err
	}
	return Comparison{Same: info.PlanHash == hash, Found: true}, nil
}
