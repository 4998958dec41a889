package docker

import (
	"context"
	"fmt"
	"sort"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/backend/docker/images"
)

// airlock prune (docs/prune.md) on the Engine side: what this daemon made that no
// container uses any more. Only objects that carry this daemon's owner key
// (LabelOwner) are ever listed or removed: built images (airlock-build/*, made by
// [sandbox.build]) and supervisor volumes. An object without an owner label (made
// before owners were recorded, or by hand) or with another daemon's key is left
// alone. Stopped sandboxes are the control daemon's business (it keeps their
// records and events), not this file's.

// DiskUsage asks the Engine for its df figures; nil when it cannot.
func (rt *Runtime) DiskUsage(ctx context.Context) *backend.DiskUsage {
	du, err := rt.Engine.DiskUsage(ctx, types.DiskUsageOptions{Types: []types.DiskUsageObject{
		types.ContainerObject, types.ImageObject, types.VolumeObject}})
	if err != nil {
		return nil
	}
	out := &backend.DiskUsage{LayersSize: du.LayersSize, Images: map[string]int64{}, Volumes: map[string]int64{}, Sandboxes: map[string]int64{}}
	for _, im := range du.Images {
		if im == nil {
			continue
		}
		size := im.Size
		if im.SharedSize > 0 && im.SharedSize <= size {
			size -= im.SharedSize
		}
		out.Images[im.ID] = size
	}
	for _, v := range du.Volumes {
		if v != nil && v.UsageData != nil && v.UsageData.Size > 0 {
			out.Volumes[v.Name] = v.UsageData.Size
		}
	}
	for _, c := range du.Containers {
		if c != nil && c.Labels[backend.LabelSandbox] != "" && c.SizeRw > 0 {
			out.Sandboxes[c.Labels[backend.LabelSandbox]] += c.SizeRw
		}
	}
	return out
}

// PruneCandidates lists this daemon's built images and supervisor volumes that
// no container uses: every built image but the newest of each project (all with
// o.All), and the supervisor volumes of other builds than this runtime's. du
// sizes them (nil: images by their whole size, volumes 0). Without an owner key
// nothing can be told to be this daemon's: the list is empty.
func (rt *Runtime) PruneCandidates(ctx context.Context, o backend.PruneOptions, du *backend.DiskUsage) ([]backend.PruneObject, error) {
	if rt.Owner == "" {
		return nil, nil
	}
	usedImages, usedVolumes, err := inUse(ctx, rt.Engine, ownerKey(rt.Owner), o.Leaving)
	if err != nil {
		return nil, err
	}
	built, err := (&images.Pruning{Engine: rt.Engine, Owner: rt.Owner}).Candidates(ctx, o, du, usedImages)
	if err != nil {
		return nil, err
	}
	volumes, err := rt.supervisors().pruneCandidates(ctx, du, usedVolumes)
	if err != nil {
		return nil, err
	}
	return append(built, volumes...), nil
}

// inUse returns the image IDs and volume names that some container (anyone's,
// running or not) uses, leaving out the containers of owner's sandboxes in
// leaving.
func inUse(ctx context.Context, eng client.APIClient, owner ownerKey, leaving map[string]bool) (map[string]bool, map[string]bool, error) {
	list, err := eng.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return nil, nil, failed("cannot list containers: %v", err)
	}
	images, volumes := map[string]bool{}, map[string]bool{}
	for _, c := range list {
		if id := c.Labels[backend.LabelSandbox]; id != "" && leaving[id] && owner.owns(c.Labels) {
			continue
		}
		images[c.ImageID] = true
		for _, m := range c.Mounts {
			if m.Type == "volume" && m.Name != "" {
				volumes[m.Name] = true
			}
		}
	}
	return images, volumes, nil
}

// pruneCandidates lists the daemon's supervisor volumes of other builds than
// this runtime's that no container uses (used: the volume names some
// container uses), with their -ok companions; du sizes them (nil: 0).
func (s *supervisors) pruneCandidates(ctx context.Context, du *backend.DiskUsage, used map[string]bool) ([]backend.PruneObject, error) {
	current, err := s.key()
	if err != nil {
		// Which volume this build uses is unknown: none is removed.
		return nil, nil
	}
	resp, err := s.engine.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", labelSupervisorKey), filters.Arg("label", backend.LabelOwner+"="+string(s.owner)))})
	if err != nil {
		return nil, failed("cannot list volumes: %v", err)
	}
	var out []backend.PruneObject
	for _, v := range resp.Volumes {
		if v == nil || v.Labels[backend.LabelOwner] != string(s.owner) {
			continue
		}
		key := v.Labels[labelSupervisorKey]
		if key == "" || key == current || used[v.Name] {
			continue
		}
		switch main := "airlock-supervisor-" + key; v.Name {
		case main: // its -ok companion goes with it
		case main + "-ok":
			if s.exists(ctx, main) {
				continue // goes with its volume, or stays with it
			}
		default:
			continue
		}
		var size int64
		if du != nil {
			size = du.Volumes[v.Name]
		}
		out = append(out, backend.PruneObject{Type: backend.PruneVolume, Name: v.Name, Size: size})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *supervisors) exists(ctx context.Context, name string) bool {
	_, err := s.engine.VolumeInspect(ctx, name)
	return err == nil || !cerrdefs.IsNotFound(err)
}

// PruneRemove removes an object PruneCandidates listed and reports whether it
// freed its space: an image only untagged (another tag or a child image keeps it)
// did not. Nothing in use is forced out: the Engine refuses an image or volume a
// container uses (made since it was listed), and so does this.
func (rt *Runtime) PruneRemove(ctx context.Context, o backend.PruneObject) (freed bool, err error) {
	switch o.Type {
	case backend.PruneImage:
		return (&images.Pruning{Engine: rt.Engine, Owner: rt.Owner}).Remove(ctx, o)
	case backend.PruneVolume:
		return rt.supervisors().remove(ctx, o.Name)
	}
	return false, fmt.Errorf("cannot remove a %s", o.Type)
}

// remove removes the supervisor volume name (or a -ok companion alone). The
// volume goes before its -ok companion: one a container mounts now stays
// whole (the Engine refuses), and a volume without its companion is filled
// again before use. Once the volume is gone its space is freed, whatever
// comes of its companion.
func (s *supervisors) remove(ctx context.Context, name string) (freed bool, err error) {
	if err := s.engine.VolumeRemove(ctx, name, false); err != nil && !cerrdefs.IsNotFound(err) {
		return false, fmt.Errorf("cannot remove volume %s: %w", name, err)
	}
	if !strings.HasSuffix(name, "-ok") {
		if err := s.engine.VolumeRemove(ctx, name+"-ok", false); err != nil && !cerrdefs.IsNotFound(err) {
			return true, fmt.Errorf("cannot remove volume %s-ok: %w", name, err)
		}
	}
	return true, nil
}
