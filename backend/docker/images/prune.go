package images

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/projectfs"
)

// BuildLabels are the labels of an image built from [sandbox.build]: its
// project, and the daemon's owner key (none without one).
func BuildLabels(owner, projectDir string) map[string]string {
	l := map[string]string{backend.LabelProject: projectDir}
	if owner != "" {
		l[backend.LabelOwner] = owner
	}
	return l
}

// Pruning is `airlock prune` of the images a daemon built (airlock-build/*,
// labelled with its owner key): listed and removed on the Engine.
type Pruning struct {
	Engine client.APIClient
	Owner  string
}

// Candidates lists the daemon's built images that no container uses (used:
// the image IDs some container uses): every one but the newest of each
// project (all with o.All). du sizes them (nil: by their whole size).
func (p *Pruning) Candidates(ctx context.Context, o backend.PruneOptions, du *backend.DiskUsage, used map[string]bool) ([]backend.PruneObject, error) {
	list, err := p.Engine.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", backend.LabelOwner+"="+p.Owner))})
	if err != nil {
		return nil, failed("cannot list images: %v", err)
	}
	byProject := map[string][]image.Summary{}
	for _, im := range list {
		pd := im.Labels[backend.LabelProject]
		if pd == "" || im.Labels[backend.LabelOwner] != p.Owner || len(buildTags(im.RepoTags)) == 0 {
			continue
		}
		byProject[pd] = append(byProject[pd], im)
	}
	var out []backend.PruneObject
	for _, pd := range slices.Sorted(maps.Keys(byProject)) {
		ims := byProject[pd]
		// Newest first, to the nanosecond (the list has seconds); the ID
		// breaks ties so the choice is stable.
		created := map[string]time.Time{}
		for _, im := range ims {
			created[im.ID] = time.Unix(im.Created, 0)
			if len(ims) > 1 {
				if in, err := p.Engine.ImageInspect(ctx, im.ID); err == nil {
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
			if (i == 0 && !o.All) || used[im.ID] || o.Busy[pd] {
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
			out = append(out, backend.PruneObject{Type: backend.PruneImage, Name: strings.Join(tags, ", "), ID: im.ID, Project: pd, Size: size, Tags: tags})
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

// Remove removes a built image Candidates listed (o, of type
// backend.PruneImage) by its tags and reports whether that freed its space:
// an image only untagged (another tag or a child image keeps it) did not.
// Once freed, the untagged images of its build steps go too
// (removeBuildSteps).
func (p *Pruning) Remove(ctx context.Context, o backend.PruneObject) (freed bool, err error) {
	var parent string // the classic builder's last step before the image
	if o.ID != "" {
		if in, err := p.Engine.ImageInspect(ctx, o.ID); err == nil {
			parent = in.Parent
		}
	}
	defer func() {
		if freed {
			p.removeBuildSteps(ctx, parent)
		}
	}()
	for _, tag := range o.Tags {
		resp, err := p.Engine.ImageRemove(ctx, tag, image.RemoveOptions{PruneChildren: true})
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
}

// removeBuildSteps removes, from id up, the untagged images of a removed image's
// build steps (the classic builder's), until a tagged one (the image the build
// started FROM), one already gone, one another image is built on (a step an
// other build shares, its cache) or one the Engine will not remove (a container
// uses it). Engine 20.10 removed them with the image; the containerd image store
// (Engine 29) does only while every ancestor is there, and its `docker image
// prune` removes the untagged steps of the images builds start FROM
// (docs/engines.md).
func (p *Pruning) removeBuildSteps(ctx context.Context, id string) {
	if id == "" {
		return
	}
	all, err := p.Engine.ImageList(ctx, image.ListOptions{All: true})
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
		in, err := p.Engine.ImageInspect(ctx, id)
		if err != nil || len(in.RepoTags) > 0 {
			return
		}
		if _, err := p.Engine.ImageRemove(ctx, id, image.RemoveOptions{PruneChildren: true}); err != nil {
			return
		}
		id = in.Parent
		children[id]--
	}
}
