package control

import (
	"context"
	"log/slog"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/pool"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/manifest"
)

// PoolStatus describes one pool (airlock pool ls).
type PoolStatus = pool.Status

// PooledSandbox is one parked sandbox.
type PooledSandbox = pool.Sandbox

// newPools returns the warm pools of s (package pool), which see of s only
// its context, its log, runtime.pool_max and its store's records.
func newPools(s *Service) *pool.Pools {
	return pool.New(pool.Host{
		Context: func() context.Context { return s.ctx },
		Log:     func() *slog.Logger { return s.log },
		Max:     s.cfg.PoolMax,
		Claimed: func(id string) bool { _, ok := s.recordID(id); return ok },
	})
}

// poolable says why a create cannot be served from a pool ("" when it can).
// A run and an idle sandbox (kind up) both can: the command (or none), the
// env, the values, the ID and the labels go with the claim or on the record.
func poolable(req *CreateRequest, r *manifest.Resolved) (configured bool, reason string) {
	configured = r.Sandbox.Pool != nil && r.Sandbox.Pool.Size > 0
	switch {
	case req.Kind != backend.KindRun && req.Kind != backend.KindUp:
		return configured, pool.MissOptions
	case req.NoPool:
		return configured, pool.MissDisabled
	case req.TTY || req.ClientFiles:
		return configured, pool.MissOptions
	case len(r.Sandbox.Ports) > 0:
		// Parked sandboxes would hold the host ports a run publishes.
		return configured, pool.MissOptions
	}
	return configured, ""
}

// takePooled hands a create a parked sandbox of its manifest's pool, or says
// why not (pool.Pools.Take).
func (s *Service) takePooled(req *CreateRequest, r *manifest.Resolved) (*pool.Member, *pool.Pool, string) {
	configured, reason := poolable(req, r)
	rt := s.rt
	if req.Engine != nil {
		rt = s.runtimeFor(*req.Engine)
	}
	return s.pools.Take(s.ctx, pool.Want{Backend: rt, Resolved: r, File: req.Manifest.File, Values: req.Secrets,
		Configured: configured, Reason: reason})
}

// Pools lists the daemon's warm pools, and how many sandboxes they hold
// together against runtime.pool_max.
func (s *Service) Pools() (list []PoolStatus, total, max int) {
	list, total = s.pools.List()
	return list, total, s.cfg.PoolMax
}

// WarmRequest fills the pool of a manifest now (airlock pool warm).
type WarmRequest struct {
	Manifest *manifest.Wire
	Secrets  map[string]string
	// Text is the manifest given as text instead (resolved as a create's:
	// resolveText); not with Manifest.
	Text   *ManifestText
	Engine *engine.Endpoint
	Size   int // 0: the manifest's sandbox.pool.size
}

// WarmPool fills the pool of a manifest to its size (or req.Size) and waits
// until that many sandboxes are parked, or the pool cannot fill.
func (s *Service) WarmPool(ctx context.Context, req *WarmRequest) (PoolStatus, error) {
	if req.Text != nil {
		if req.Manifest != nil {
			return PoolStatus{}, errorf(ErrInvalidRequest, "give a resolved manifest or a manifest text, not both")
		}
		w, values, err := s.resolveText(req.Text)
		if err != nil {
			return PoolStatus{}, err
		}
		r := *req
		r.Manifest, r.Secrets, r.Text = w, values, nil
		req = &r
	}
	if req.Manifest == nil {
		return PoolStatus{}, errorf(ErrInvalidRequest, "a manifest is required")
	}
	r, err := fromWire(*req.Manifest, req.Secrets)
	if err != nil {
		return PoolStatus{}, err
	}
	size := req.Size
	if size == 0 && r.Sandbox.Pool != nil {
		size = r.Sandbox.Pool.Size
	}
	if size <= 0 {
		return PoolStatus{}, errorf(ErrConfig, "the manifest has no [sandbox.pool] size: set one, or give a size")
	}
	if size > s.cfg.PoolMax {
		return PoolStatus{}, errorf(ErrConfig, "a pool of %d is more than runtime.pool_max (%d) of config.toml allows", size, s.cfg.PoolMax)
	}
	rt := s.rt
	if req.Engine != nil {
		rt = s.runtimeFor(*req.Engine)
	}
	key, err := s.pools.Key(ctx, rt, r, req.Secrets)
	if err != nil {
		return PoolStatus{}, errorf(ErrConfig, "cannot pool this manifest: %v", err)
	}
	return s.pools.Warm(ctx, rt, r, req.Manifest.File, key, size)
}

// DrainPools removes the parked sandboxes of one project's pools (every pool
// when project is "") and returns how many.
func (s *Service) DrainPools(ctx context.Context, project string) int {
	return s.pools.Drain(ctx, project)
}
