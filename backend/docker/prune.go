package docker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/projectfs"
)

// airlock prune (docs/prune.md) on the Engine side: what this daemon made that no
// container uses any more. Only objects that carry this daemon's owner key
// (LabelOwner) are ever listed or removed: built images (airlock-build/*, made by
// [sandbox.build]) and supervisor volumes. An object without an owner label (made
// before owners were recorded, or by hand) or with another daemon's key is left
// alone. Stopped sandboxes are the control daemon's business (it keeps their
// records and events), not this file's.

// supervisorLabels are the labels of a supervisor volume (and its -ok companion).
func (rt *Runtime) supervisorLabels(key string) map[string]string {
	return rt.ownLabel(map[string]string{labelSupervisorKey: key})
}

// buildLabels are the labels of an image built from [sandbox.build].
func (rt *Runtime) buildLabels(projectDir string) map[string]string {
	return rt.ownLabel(map[string]string{backend.LabelProject: projectDir})
}

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
	usedImages, usedVolumes, err := rt.inUse(ctx, o.Leaving)
	if err != nil {
		return nil, err
	}
	images, err := rt.pruneImages(ctx, o, du, usedImages)
	if err != nil {
		return nil, err
	}
	volumes, err := rt.pruneVolumes(ctx, du, usedVolumes)
	if err != nil {
		return nil, err
	}
	return append(images, volumes...), nil
}

// inUse returns the image IDs and volume names that some container (anyone's,
// running or not) uses, leaving out the containers of the sandboxes in leaving.
func (rt *Runtime) inUse(ctx context.Context, leaving map[string]bool) (map[string]bool, map[string]bool, error) {
	list, err := rt.Engine.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return nil, nil, failed("cannot list containers: %v", err)
	}
	images, volumes := map[string]bool{}, map[string]bool{}
	for _, c := range list {
		if id := c.Labels[backend.LabelSandbox]; id != "" && leaving[id] && rt.owns(c.Labels) {
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

func (rt *Runtime) pruneImages(ctx context.Context, o backend.PruneOptions, du *backend.DiskUsage, used map[string]bool) ([]backend.PruneObject, error) {
	list, err := rt.Engine.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", backend.LabelOwner+"="+rt.Owner))})
	if err != nil {
		return nil, failed("cannot list images: %v", err)
	}
	byProject := map[string][]image.Summary{}
	for _, im := range list {
		p := im.Labels[backend.LabelProject]
		if p == "" || im.Labels[backend.LabelOwner] != rt.Owner || len(buildTags(im.RepoTags)) == 0 {
			continue
		}
		byProject[p] = append(byProject[p], im)
	}
	var out []backend.PruneObject
	for _, p := range slices.Sorted(maps.Keys(byProject)) {
		ims := byProject[p]
		// Newest first, to the nanosecond (the list has seconds); the ID
		// breaks ties so the choice is stable.
		created := map[string]time.Time{}
		for _, im := range ims {
			created[im.ID] = time.Unix(im.Created, 0)
			if len(ims) > 1 {
				if in, err := rt.Engine.ImageInspect(ctx, im.ID); err == nil {
					if t, err := time.Parse(time.RFC3339Nano, in.Created); err == nil {
						created[im.ID] = t
					}
				}
			}
		}
		sort.Slice(ims, func(i, j int) bool {
			if ci, cj := created[ims[i].ID], created[ims[j].ID]; !ci.Equal(cj) {
				return ci.After(cj)
			}
			return ims[i].ID < ims[j].ID
		})
		for i, im := range ims {
			if (i == 0 && !o.All) || used[im.ID] || o.Busy[p] {
				continue
			}
			tags := buildTags(im.RepoTags)
			size := im.Size
			if du != nil {
				if s, ok := du.Images[im.ID]; ok {
					size = s
				}
			}
			if len(tags) < len(im.RepoTags) {
				size = 0 // tagged by someone else too: only untagged
			}
			out = append(out, backend.PruneObject{Type: backend.PruneImage, Name: strings.Join(tags, ", "), ID: im.ID, Project: p, Size: size, Tags: tags})
		}
	}
	return out, nil
}

// buildTags are the airlock-build/* tags among tags, sorted: as Docker lists
// them, or fully qualified (docker.io/airlock-build/*) as Podman's
// Docker-compatible API does.
func buildTags(tags []string) []string {
	var out []string
	for _, t := range tags {
		if strings.HasPrefix(strings.TrimPrefix(t, "docker.io/"), projectfs.BuildRepo+"/") {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

func (rt *Runtime) pruneVolumes(ctx context.Context, du *backend.DiskUsage, used map[string]bool) ([]backend.PruneObject, error) {
	current, err := rt.supervisorKey()
	if err != nil {
		// Which volume this build uses is unknown: none is removed.
		return nil, nil
	}
	resp, err := rt.Engine.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", labelSupervisorKey), filters.Arg("label", backend.LabelOwner+"="+rt.Owner))})
	if err != nil {
		return nil, failed("cannot list volumes: %v", err)
	}
	var out []backend.PruneObject
	for _, v := range resp.Volumes {
		if v == nil || v.Labels[backend.LabelOwner] != rt.Owner {
			continue
		}
		key := v.Labels[labelSupervisorKey]
		if key == "" || key == current || used[v.Name] {
			continue
		}
		switch main := "airlock-supervisor-" + key; v.Name {
		case main: // its -ok companion goes with it
		case main + "-ok":
			if rt.volumeExists(ctx, main) {
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

func (rt *Runtime) volumeExists(ctx context.Context, name string) bool {
	_, err := rt.Engine.VolumeInspect(ctx, name)
	return err == nil || !cerrdefs.IsNotFound(err)
}

// PruneRemove removes an object PruneCandidates listed and reports whether it
// freed its space: an image only untagged (another tag or a child image keeps it)
// did not. Nothing in use is forced out: the Engine refuses an image or volume a
// container uses (made since it was listed), and so does this.
func (rt *Runtime) PruneRemove(ctx context.Context, o backend.PruneObject) (freed bool, err error) {
	switch o.Type {
	case backend.PruneImage:
		var parent string // the classic builder's last step before the image
		if o.ID != "" {
			if in, err := rt.Engine.ImageInspect(ctx, o.ID); err == nil {
				parent = in.Parent
			}
		}
		defer func() {
			if freed {
				rt.removeBuildSteps(ctx, parent)
			}
		}()
		for _, tag := range o.Tags {
			resp, err := rt.Engine.ImageRemove(ctx, tag, image.RemoveOptions{PruneChildren: true})
			if err != nil && !cerrdefs.IsNotFound(err) {
				return freed, fmt.Errorf("cannot remove image %s: %w", tag, err)
			}
			for _, d := range resp {
				if d.Deleted != "" {
					freed = true
				}
			}
		}
		return freed, nil
	case backend.PruneVolume:
		// The volume before its -ok companion: one a container mounts now stays
		// whole (the Engine refuses), and a volume without its companion is
		// filled again before use.
		if err := rt.Engine.VolumeRemove(ctx, o.Name, false); err != nil && !cerrdefs.IsNotFound(err) {
			return false, fmt.Errorf("cannot remove volume %s: %w", o.Name, err)
		}
		if !strings.HasSuffix(o.Name, "-ok") {
			if err := rt.Engine.VolumeRemove(ctx, o.Name+"-ok", false); err != nil && !cerrdefs.IsNotFound(err) {
				return true, fmt.Errorf("cannot remove volume %s-ok: %w", o.Name, err)
			}
		}
		return true, nil
	}
	return false, fmt.Errorf("cannot remove a %s", o.Type)
}

// removeBuildSteps removes, from id up, the untagged images of a removed image's
// build steps (the classic builder's), until a tagged one (the image the build
// started FROM), one already gone, one another image is built on (a step an
// other build shares, its cache) or one the Engine will not remove (a container
// uses it). Engine 20.10 removed them with the image; the containerd image store
// (Engine 29) does only while every ancestor is there, and its `docker image
// prune` removes the untagged steps of the images builds start FROM
// (docs/engines.md).
func (rt *Runtime) removeBuildSteps(ctx context.Context, id string) {
	if id == "" {
		return
	}
	all, err := rt.Engine.ImageList(ctx, image.ListOptions{All: true})
	if err != nil {
		return
	}
	children := map[string]int{}
	for _, im := range all {
		if im.ParentID != "" {
			children[im.ParentID]++
		}
	}
	for id != "" && children[id] == 0 {
		in, err := rt.Engine.ImageInspect(ctx, id)
		if err != nil || len(in.RepoTags) > 0 {
			return
		}
		if _, err := rt.Engine.ImageRemove(ctx, id, image.RemoveOptions{PruneChildren: true}); err != nil {
			return
		}
		id = in.Parent
		children[id]--
	}
}
