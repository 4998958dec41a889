package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/airlock-dev/airlock/backend"
)

// Snapshots on the Docker Engine: each container of the sandbox committed as a
// local image (airlock-snapshot/NAME:primary, airlock-snapshot/NAME:service-S),
// every container paused during the commits so that the copies are consistent
// with each other. The images carry the snapshot's labels (backend.LabelSnapshot
// and the others) and this daemon's owner key; the manifest rides on the
// primary's image in its wire form, substituted values masked.
//
// A commit keeps the container's configuration where the one given leaves a
// field empty, and adds the container's labels and environment variables to
// those given. So the configuration given is the base image's, with every
// label and variable the container has but its image has not set empty: no
// value the sandbox was given (a service's password, say) and none of the
// sandbox's labels reaches the snapshot's image. Data in volumes (an image's
// VOLUME, a bind mount) is not part of a container's filesystem, so not of a
// snapshot.

var _ backend.Snapshotter = (*Runtime)(nil)

// SnapshotRepo is the repository of snapshot images.
const SnapshotRepo = "airlock-snapshot"

var tagRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,119}$`)

// snapshotRef is the image of a snapshot's primary (service "") or service.
func snapshotRef(name, service string) (string, error) {
	tag := "primary"
	if service != "" {
		tag = "service-" + service
		if !tagRE.MatchString(tag) {
			return "", failed("cannot snapshot service %q: its name cannot be an image tag", service)
		}
	}
	return SnapshotRepo + "/" + name + ":" + tag, nil
}

// Snapshot commits the primary and every service container of sb.
func (rt *Runtime) Snapshot(ctx context.Context, sb *backend.Sandbox, req backend.SnapshotRequest) (*backend.Snapshot, error) {
	if have, err := rt.Snapshots(ctx, req.Name); err != nil {
		return nil, err
	} else if len(have) > 0 {
		return nil, fmt.Errorf("cannot take snapshot %s: %w", req.Name, backend.ErrSnapshotExists)
	}
	type job struct {
		service, container, ref string
		running                 bool
		img                     backend.SnapshotImage
	}
	jobs := []*job{{container: sb.PrimaryID}}
	for _, name := range sortedKeys(sb.Services) {
		jobs = append(jobs, &job{service: name, container: sb.Services[name]})
	}
	now := time.Now().UTC()
	configs := make([]*container.Config, len(jobs))
	for i, j := range jobs {
		ref, err := snapshotRef(req.Name, j.service)
		if err != nil {
			return nil, err
		}
		j.ref = ref
		ci, err := rt.Engine.ContainerInspect(ctx, j.container)
		if err != nil {
			return nil, failed("cannot snapshot the sandbox: %v", err)
		}
		j.running = ci.State != nil && ci.State.Running && !ci.State.Paused
		base, err := rt.Engine.ImageInspect(ctx, ci.Image)
		if err != nil {
			return nil, failed("cannot snapshot the sandbox: the image of its container: %v", err)
		}
		labels := map[string]string{
			backend.LabelSnapshot: req.Name, backend.LabelSnapshotSandbox: sb.ID,
			backend.LabelSnapshotCreated: now.Format(time.RFC3339Nano),
		}
		if rt.Owner != "" {
			labels[backend.LabelOwner] = rt.Owner
		}
		if j.service == "" {
			labels[backend.LabelSnapshotManifest] = string(req.Manifest)
		} else {
			labels[backend.LabelService] = j.service
		}
		var bc container.Config
		if base.Config != nil {
			// The image's configuration has the container's field names.
			b, _ := json.Marshal(base.Config)
			_ = json.Unmarshal(b, &bc)
		}
		configs[i] = snapshotConfig(ci.Config, &bc, labels)
	}
	// Pause them all, then commit: the files of the primary and of its
	// services are of one moment.
	var paused []string
	defer func() {
		for _, id := range paused {
			_ = rt.Engine.ContainerUnpause(context.WithoutCancel(ctx), id)
		}
	}()
	for _, j := range jobs {
		if !j.running {
			continue
		}
		if err := pauseRetrying(ctx, rt.Engine, j.container); err != nil {
			return nil, failed("cannot pause the sandbox for its snapshot: %v", err)
		}
		paused = append(paused, j.container)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := rt.Engine.ContainerCommit(ctx, j.container, container.CommitOptions{Reference: j.ref, Pause: false, Config: configs[i]})
			if err != nil {
				errs[i] = err
				return
			}
			j.img = backend.SnapshotImage{Service: j.service, Image: j.ref, ID: resp.ID}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = rt.RemoveSnapshot(context.WithoutCancel(ctx), req.Name)
		return nil, failed("cannot snapshot the sandbox: %v", err)
	}
	out := &backend.Snapshot{Name: req.Name, Sandbox: sb.ID, CreatedAt: now, Manifest: req.Manifest, Primary: jobs[0].img}
	for _, j := range jobs[1:] {
		out.Services = append(out.Services, j.img)
	}
	return out, nil
}

// snapshotConfig is the configuration a commit of a container (c, made from
// an image whose configuration is base) is given: base's, with labels over
// its labels and every label and variable c has but base has not set empty.
func snapshotConfig(c, base *container.Config, labels map[string]string) *container.Config {
	out := &container.Config{}
	if base != nil {
		b := *base
		out = &b
	}
	baseLabels, baseEnv := out.Labels, map[string]bool{}
	for _, kv := range out.Env {
		k, _, _ := strings.Cut(kv, "=")
		baseEnv[k] = true
	}
	out.Labels = map[string]string{}
	if c != nil {
		for k := range c.Labels {
			out.Labels[k] = ""
		}
		env := append([]string(nil), out.Env...)
		for _, kv := range c.Env {
			if k, _, _ := strings.Cut(kv, "="); !baseEnv[k] {
				env = append(env, k+"=")
				baseEnv[k] = true
			}
		}
		out.Env = env
	}
	for k, v := range baseLabels {
		out.Labels[k] = v
	}
	for k, v := range labels {
		out.Labels[k] = v
	}
	return out
}

// Snapshots lists this daemon's snapshots (name "": all), by name.
func (rt *Runtime) Snapshots(ctx context.Context, name string) ([]backend.Snapshot, error) {
	f := filters.NewArgs(filters.Arg("label", backend.LabelSnapshot))
	if name != "" {
		f = filters.NewArgs(filters.Arg("label", backend.LabelSnapshot+"="+name))
	}
	if rt.Owner != "" {
		f.Add("label", backend.LabelOwner+"="+rt.Owner)
	}
	list, err := rt.Engine.ImageList(ctx, image.ListOptions{Filters: f})
	if err != nil {
		return nil, failed("cannot list snapshots: %v", err)
	}
	byName := map[string]*backend.Snapshot{}
	for _, im := range list {
		n := im.Labels[backend.LabelSnapshot]
		if n == "" || (rt.Owner != "" && im.Labels[backend.LabelOwner] != rt.Owner) {
			continue
		}
		s := byName[n]
		if s == nil {
			s = &backend.Snapshot{Name: n, Sandbox: im.Labels[backend.LabelSnapshotSandbox]}
			s.CreatedAt, _ = time.Parse(time.RFC3339Nano, im.Labels[backend.LabelSnapshotCreated])
			byName[n] = s
		}
		ref := ""
		svc := im.Labels[backend.LabelService]
		want, _ := snapshotRef(n, svc)
		for _, t := range im.RepoTags {
			if t == want {
				ref = t
			}
		}
		if ref == "" {
			continue // not its own tag: a stray image
		}
		si := backend.SnapshotImage{Service: svc, Image: ref, ID: im.ID, Size: im.Size}
		if m, ok := im.Labels[backend.LabelSnapshotManifest]; ok && svc == "" {
			s.Manifest, s.Primary = []byte(m), si
		} else {
			s.Services = append(s.Services, si)
		}
	}
	out := make([]backend.Snapshot, 0, len(byName))
	for _, s := range byName {
		sort.Slice(s.Services, func(i, j int) bool { return s.Services[i].Service < s.Services[j].Service })
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveSnapshot removes the images of snapshot name; one a container uses
// stays (ErrSnapshotInUse), the others go.
func (rt *Runtime) RemoveSnapshot(ctx context.Context, name string) error {
	list, err := rt.Snapshots(ctx, name)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return fmt.Errorf("%w: %s", backend.ErrSnapshotNotFound, name)
	}
	s := list[0]
	var errs []error
	for _, im := range append([]backend.SnapshotImage{s.Primary}, s.Services...) {
		if im.Image == "" {
			continue
		}
		if _, err := rt.Engine.ImageRemove(ctx, im.Image, image.RemoveOptions{PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			if cerrdefs.IsConflict(err) {
				err = fmt.Errorf("%w: %s is used by a container (remove the sandboxes made from it first)", backend.ErrSnapshotInUse, im.Image)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
