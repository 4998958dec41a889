package backend

import (
	"io"

	"github.com/docker/docker/api/types/registry"

	"github.com/airlock-dev/airlock/registryauth"
)

// What a backend is told to prepare, and what it reports and removes for prune.

// PrepareOptions are one Prepare call's own: where its output goes and the
// credentials its pulls and build send. They are not the runtime's: calls with
// options of their own may run at once on one runtime (the control daemon's).
type PrepareOptions struct {
	// Progress receives pull and build progress and notices; nil for none.
	Progress io.Writer
	// ProgressTTY draws progress for a terminal rather than as plain lines.
	ProgressTTY bool
	Quiet       bool
	// Credentials, when set, gives the credentials to pull ref with (the
	// caller's, looked up by registryauth.For where the caller runs); ok false
	// leaves the runtime to look them up, as a create does. An error is the
	// caller's failed lookup: the pull fails with it.
	Credentials func(ref string) (c registryauth.Credentials, ok bool, err error)
	// BuildAuths, when not nil, are the credentials a build sends, by registry
	// (the caller's, from registryauth.All), instead of those the runtime finds.
	BuildAuths map[string]registry.AuthConfig
	// ClientFiles: the sandbox's host paths are on the client's machine
	// (Request.ClientFiles): mounts are checked as on a remote Engine.
	ClientFiles bool
	// ToolEnv: as Request.ToolEnv.
	ToolEnv map[string]string
	// BuildTar, when set, is a [sandbox.build] context a client sent (a tar
	// file on this machine) whose hash is BuildSum: the image is built from it
	// instead of from the context dir.
	BuildTar, BuildSum string
}

// DiskUsage is what the Engine's df API says about space, for sizing what prune
// removes. A nil *DiskUsage (the Engine did not answer) knows nothing.
type DiskUsage struct {
	LayersSize int64
	Images     map[string]int64 // image ID -> size not shared with another image
	Volumes    map[string]int64 // volume name -> size of its data
	Sandboxes  map[string]int64 // sandbox ID -> its containers' writable layers
}

// SandboxSize is the space of a sandbox's containers' writable layers (0 when unknown).
func (du *DiskUsage) SandboxSize(id string) int64 {
	if du == nil {
		return 0
	}
	return du.Sandboxes[id]
}

// Types of object prune removes.
const (
	PruneImage   = "image"
	PruneVolume  = "volume"
	PruneSandbox = "sandbox"
)

// PruneObject is an Engine object prune removes (or would remove).
type PruneObject struct {
	Type string // PruneImage or PruneVolume
	// Name is the image's airlock-build tag (its tags joined by ", " when it has
	// several) or the volume's name.
	Name string
	// ID is the image's ID; empty for a volume.
	ID string
	// Project is the project dir an image was built for.
	Project string
	// Size is the space the object holds alone, in bytes: an image's layers no
	// other image shares, a volume's data (0 when the Engine does not say).
	Size int64

	// Tags are an image's airlock-build tags, which its removal untags.
	Tags []string
}

// PruneOptions says what prune keeps besides what containers use.
type PruneOptions struct {
	// All removes every built image no container uses; without it the newest
	// image of each project stays.
	All bool
	// Leaving are the IDs of sandboxes the same prune removes: their containers
	// do not count as users (for a dry run, which removes nothing).
	Leaving map[string]bool
	// Busy are project dirs with a sandbox being created: their images stay (the
	// container that will use one may not exist yet).
	Busy map[string]bool
}
