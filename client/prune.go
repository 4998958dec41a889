package client

import (
	"context"
	"net/http"
)

// PruneRequest asks the daemon to remove what no sandbox uses (airlock prune,
// docs/prune.md): stopped run sandboxes kept longer than the retention, built
// images but the newest of each project (every one with All) and supervisor
// volumes of other builds, all of them this daemon's own.
type PruneRequest struct {
	// DryRun lists what would be removed and removes nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// All removes the newest built image of each project too (when no
	// container uses it).
	All bool `json:"all,omitempty"`
	// Engine is a Docker Engine to prune besides the ones the daemon serves
	// sandboxes on (the caller's own); nil for those only.
	Engine *Engine `json:"engine,omitempty"`
}

// Types of pruned object.
const (
	PrunedSandbox = "sandbox"
	PrunedImage   = "image"
	PrunedVolume  = "volume"
)

// PrunedObject is one object prune removed (or, in a dry run, would remove).
type PrunedObject struct {
	Type string `json:"type"` // sandbox, image or volume
	// Name is the sandbox's ID, the image's airlock-build tag or the volume's name.
	Name string `json:"name"`
	// ID is the image's ID.
	ID string `json:"id,omitempty"`
	// Project is the project dir of a sandbox or a built image.
	Project string `json:"project,omitempty"`
	// Engine is the Engine the object is on.
	Engine string `json:"engine,omitempty"`
	// Size is the space the object holds alone, in bytes (0 when the Engine
	// does not say).
	Size int64 `json:"size"`
}

// PruneResult is what prune removed, and the space it freed.
type PruneResult struct {
	DryRun  bool           `json:"dry_run"`
	Removed []PrunedObject `json:"removed"`
	// Reclaimed is the space freed in bytes; in a dry run, the space the
	// objects hold alone (removing them frees at least that much).
	Reclaimed int64 `json:"reclaimed"`
	// Errors are the objects that could not be removed, and why.
	Errors []string `json:"errors,omitempty"`
}

// Prune removes (or with DryRun lists) what no sandbox uses. It returns once
// everything is removed: kept sandboxes are deleted (their events recorded)
// before the images they used are.
func (c *Client) Prune(ctx context.Context, req *PruneRequest) (*PruneResult, error) {
	var res PruneResult
	if req == nil {
		req = &PruneRequest{}
	}
	return &res, c.do(ctx, http.MethodPost, "/v1/prune", req, &res)
}
