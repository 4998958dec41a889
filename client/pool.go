package client

import (
	"context"
	"net/http"
	"time"
)

// Pool is one warm pool of the daemon (airlock pool ls, docs/pool.md): the
// sandboxes of one manifest made, started and parked in advance for its runs.
type Pool struct {
	// Key is the strict key of what its sandboxes are (a run whose manifest,
	// image, Engine, values or copied files differ gets none of them).
	Key     string `json:"key"`
	Project string `json:"project"`
	File    string `json:"file"`
	Engine  string `json:"engine"`
	// Size is how many it keeps; Ready how many are parked and healthy;
	// Starting how many are being made.
	Size     int `json:"size"`
	Ready    int `json:"ready"`
	Starting int `json:"starting"`
	// Hits counts the runs that got a parked sandbox; Misses the others, by
	// reason: empty, stale, unhealthy, disabled, options.
	Hits   int            `json:"hits"`
	Misses map[string]int `json:"misses"`
	// Stale counts the parked sandboxes removed because the key changed;
	// Failures the sandboxes that could not be made or became unhealthy,
	// LastError the last of those failures.
	Stale     int       `json:"stale"`
	Failures  int       `json:"failures"`
	LastError string    `json:"last_error,omitempty"`
	IdleTTL   string    `json:"idle_ttl"`
	LastUsed  time.Time `json:"last_used"`
	// Sandboxes are its parked (and parking) sandboxes.
	Sandboxes []PooledSandbox `json:"sandboxes"`
}

// PooledSandbox is one sandbox of a pool.
type PooledSandbox struct {
	ID        string    `json:"id"`
	Container string    `json:"container"`
	Ready     bool      `json:"ready"`
	Since     time.Time `json:"since"`
}

// PoolList is every warm pool of the daemon, and how many sandboxes they hold
// together against runtime.pool_max.
type PoolList struct {
	Pools   []Pool `json:"pools"`
	Pooled  int    `json:"pooled"`
	PoolMax int    `json:"pool_max"`
}

// WarmRequest fills the pool of a manifest now and waits until it is full.
// The manifest is given as a create takes it: Manifest and Secrets, or a
// ManifestSource (ManifestTOML or ManifestDoc with Vars and ProjectDir), which
// the daemon resolves. A run gets one of the pool's sandboxes when its
// manifest resolves to the same.
type WarmRequest struct {
	Manifest *Manifest         `json:"manifest,omitempty"`
	Secrets  map[string]string `json:"secrets,omitempty"`
	ManifestSource
	Engine *Engine `json:"engine,omitempty"`
	// Size is how many sandboxes to park (0: the manifest's sandbox.pool.size);
	// it holds until the pool is drained.
	Size int `json:"size,omitempty"`
}

// DrainRequest removes parked sandboxes: of one project's pools, or all.
type DrainRequest struct {
	Project string `json:"project,omitempty"`
	All     bool   `json:"all,omitempty"`
}

// DrainResult says how many parked sandboxes a drain removed.
type DrainResult struct {
	Removed int `json:"removed"`
}

// Pools lists the daemon's warm pools.
func (c *Client) Pools(ctx context.Context) (*PoolList, error) {
	var out PoolList
	return &out, c.do(ctx, http.MethodGet, "/v1/pools", nil, &out)
}

// WarmPool fills the pool of a manifest and returns it once full.
func (c *Client) WarmPool(ctx context.Context, req *WarmRequest) (*Pool, error) {
	var out Pool
	return &out, c.do(ctx, http.MethodPost, "/v1/pools/warm", req, &out)
}

// DrainPools removes parked sandboxes and returns once they are gone.
func (c *Client) DrainPools(ctx context.Context, req *DrainRequest) (*DrainResult, error) {
	var out DrainResult
	return &out, c.do(ctx, http.MethodPost, "/v1/pools/drain", req, &out)
}
