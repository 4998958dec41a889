package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Snapshots: a sandbox's filesystems (its primary's and each service's) saved
// as images of its Engine with the manifest it was made from; a create with
// FromSnapshot starts a sandbox of one, and a fork makes copies of a running
// sandbox.

// Reasons of the snapshot routes' errors.
const (
	ReasonSnapshotNotFound = "snapshot_not_found" // 404
	ReasonSnapshotExists   = "snapshot_exists"    // 409: a snapshot has that name
	ReasonSnapshotInUse    = "snapshot_in_use"    // 409: a sandbox made from it still exists
)

// SnapshotRequest asks for a snapshot of a sandbox (POST
// /v1/sandboxes/{id}/snapshots); Name "" lets the daemon name it.
type SnapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// SnapshotImage is the image of one container of a snapshot.
type SnapshotImage struct {
	// Service is the service's name; "" for the primary.
	Service string `json:"service,omitempty"`
	Image   string `json:"image"`
	ID      string `json:"id"`
	Size    int64  `json:"size,omitempty"`
}

// Snapshot is a snapshot the daemon holds.
type Snapshot struct {
	Name      string    `json:"name"`
	Sandbox   string    `json:"sandbox"`
	CreatedAt time.Time `json:"created_at"`
	// Manifest is the manifest the sandbox was made from, every substituted
	// value masked.
	Manifest *Manifest       `json:"manifest,omitempty"`
	Primary  SnapshotImage   `json:"primary"`
	Services []SnapshotImage `json:"services"`
}

// ForkRequest asks for Count copies of a running sandbox; IDs, when given,
// are the copies' IDs (as many as Count, which may then be left out).
type ForkRequest struct {
	Count int      `json:"count"`
	IDs   []string `json:"ids,omitempty"`
}

// Fork is a fork's result: the snapshot the copies are made from and the
// copies, accepted (they start in the background, as a create's sandbox does).
type Fork struct {
	Snapshot  Snapshot  `json:"snapshot"`
	Sandboxes []Sandbox `json:"sandboxes"`
}

// TakeSnapshot saves sandbox id's filesystems as snapshot name ("": a name of
// the daemon's choosing).
func (c *Client) TakeSnapshot(ctx context.Context, id, name string) (*Snapshot, error) {
	var out Snapshot
	return &out, c.do(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/snapshots", &SnapshotRequest{Name: name}, &out)
}

// Snapshots lists the daemon's snapshots.
func (c *Client) Snapshots(ctx context.Context) ([]Snapshot, error) {
	var out []Snapshot
	return out, c.do(ctx, http.MethodGet, "/v1/snapshots", nil, &out)
}

// DeleteSnapshot removes a snapshot's images.
func (c *Client) DeleteSnapshot(ctx context.Context, name string) (*Snapshot, error) {
	var out Snapshot
	return &out, c.do(ctx, http.MethodDelete, "/v1/snapshots/"+url.PathEscape(name), nil, &out)
}

// Fork makes count copies of running sandbox id.
func (c *Client) Fork(ctx context.Context, id string, count int) (*Fork, error) {
	var out Fork
	return &out, c.do(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/fork", &ForkRequest{Count: count}, &out)
}

// ForkWith makes the copies req asks for of running sandbox id (with their
// IDs when req names them). A fork is whole or nothing: when a copy cannot be
// made, those made are deleted and so is the fork's snapshot.
func (c *Client) ForkWith(ctx context.Context, id string, req *ForkRequest) (*Fork, error) {
	var out Fork
	return &out, c.do(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/fork", req, &out)
}
