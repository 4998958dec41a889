package backend

import (
	"context"
	"errors"
	"time"
)

// Snapshots: a sandbox's filesystems (its primary's and each service's
// container) saved as images of the backend, with the manifest it was made
// from, to make new sandboxes of. A backend that can is a Snapshotter; the
// Kubernetes backend is not one (ErrSnapshotsUnsupported).

// Labels on a snapshot's images (besides LabelOwner).
const (
	// LabelSnapshot names the snapshot an image belongs to.
	LabelSnapshot = "dev.airlock.snapshot"
	// LabelSnapshotSandbox is the ID of the sandbox it was taken of.
	LabelSnapshotSandbox = "dev.airlock.snapshot.sandbox"
	// LabelSnapshotManifest, on the primary's image, is the sandbox's
	// resolved manifest in its wire form (manifest.Wire, JSON): every
	// substituted value masked.
	LabelSnapshotManifest = "dev.airlock.snapshot.manifest"
	// LabelSnapshotCreated is when it was taken (RFC 3339).
	LabelSnapshotCreated = "dev.airlock.snapshot.created"
)

// ErrSnapshotsUnsupported is the error of a snapshot on a backend that has
// no way to take one.
var ErrSnapshotsUnsupported = errors.New("not supported by this backend")

// ErrSnapshotNotFound is what RemoveSnapshot wraps for a name with no image.
var ErrSnapshotNotFound = errors.New("no such snapshot")

// ErrSnapshotExists is what Snapshot wraps for a name a snapshot has.
var ErrSnapshotExists = errors.New("a snapshot of that name exists")

// ErrSnapshotInUse is what RemoveSnapshot wraps when a container still uses
// one of the snapshot's images.
var ErrSnapshotInUse = errors.New("snapshot in use")

// SnapshotRequest asks for a snapshot of a sandbox.
type SnapshotRequest struct {
	Name string
	// Manifest is the sandbox's manifest in its wire form (values masked).
	Manifest []byte
}

// SnapshotImage is one container's filesystem in a snapshot.
type SnapshotImage struct {
	Service string // "" for the primary
	Image   string // its reference (repository:tag)
	ID      string
	Size    int64
}

// Snapshot is a snapshot the backend holds.
type Snapshot struct {
	Name      string
	Sandbox   string
	CreatedAt time.Time
	Manifest  []byte // the manifest's wire form (values masked)
	Primary   SnapshotImage
	Services  []SnapshotImage
}

// Snapshotter is a backend that takes snapshots.
type Snapshotter interface {
	// Snapshot saves sb's containers' filesystems, each paused while it is
	// copied, as the images of snapshot req.Name.
	Snapshot(ctx context.Context, sb *Sandbox, req SnapshotRequest) (*Snapshot, error)
	// Snapshots lists the snapshots of this daemon (name "" for all).
	Snapshots(ctx context.Context, name string) ([]Snapshot, error)
	// RemoveSnapshot removes a snapshot's images.
	RemoveSnapshot(ctx context.Context, name string) error
}
