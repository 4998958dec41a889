package docker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/backend/docker/images"
	"github.com/airlock-dev/airlock/manifest"
)

// PlanHashFor returns the plan hash a sandbox made from r now would carry (the
// image is built or pulled when missing). An image a prepare found moments
// ago is not asked of the Engine again (recentImages).
func (rt *Runtime) PlanHashFor(ctx context.Context, r *manifest.Resolved) (string, error) {
	if r.Sandbox.Build == nil {
		if id, ok := rt.recent.get(r.Sandbox.Image); ok {
			return backend.PlanHash(r, id), nil
		}
	}
	_, img, err := rt.images(nil).Sandbox(ctx, r)
	if err != nil {
		return "", err
	}
	return backend.PlanHash(r, img.ID), nil
}

// recentImages are the image IDs the last prepares found, by reference, for
// recentImageFor: the create that follows a prepare (a run's: its warm pool's
// key; `up`'s comparison) takes the ID its prepare just found rather than
// asking the Engine again (an inspect: one to several milliseconds of a warm
// run). A prepare always asks the Engine, so a tag moved before a run is seen
// by that run: what its create uses is its own prepare's finding or a later
// one.
type recentImages struct {
	mu sync.Mutex
	m  map[string]recentImage
}

type recentImage struct {
	id    string
	asked time.Time // when the Engine was asked
}

// recentImageFor is how long a prepare's finding serves the creates after it.
const recentImageFor = 2 * time.Second

// put keeps id as what ref named when the Engine was asked at asked (a later
// answer to an earlier question does not replace a newer one's).
func (ri *recentImages) put(ref, id string, asked time.Time) {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	if ri.m == nil {
		ri.m = map[string]recentImage{}
	}
	for k, v := range ri.m {
		if time.Since(v.asked) >= recentImageFor {
			delete(ri.m, k)
		}
	}
	if cur, ok := ri.m[ref]; ok && cur.asked.After(asked) {
		return
	}
	ri.m[ref] = recentImage{id: id, asked: asked}
}

// get is what a prepare found ref to be within recentImageFor.
func (ri *recentImages) get(ref string) (string, bool) {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	v, ok := ri.m[ref]
	if !ok || time.Since(v.asked) >= recentImageFor {
		return "", false
	}
	return v.id, true
}

// Prepare does the host-side and image work of a future Create where its output can
// be seen: mount sources are checked (a missing one with missing = "fail" is a config
// error), warnings printed (a writable mount the sandbox user cannot write among
// them), and the images pulled with progress or built. Its output
// and credentials are o's, not the runtime's: calls may run at once.
func (rt *Runtime) Prepare(ctx context.Context, r *manifest.Resolved, o backend.PrepareOptions) error {
	w := rt.images(&o)
	p := rt.planner()
	hp, err := p.plan(ctx, r, rt.Remote || o.ClientFiles, o.ToolEnv)
	if err != nil {
		return err
	}
	for _, warning := range hp.Warnings {
		w.Notice("warning: %s", warning)
	}
	asked := time.Now()
	imageRef, img, err := w.Sandbox(ctx, r)
	if err != nil {
		return err
	}
	if r.Sandbox.Build == nil {
		rt.recent.put(imageRef, img.ID, asked)
	}
	for _, warning := range p.writableWarnings(ctx, rt.accounts(), r, hp, imageRef, img) {
		w.Notice("warning: %s", warning)
	}
	for name, s := range r.Services {
		if _, err := w.Ensure(ctx, s.Image); err != nil {
			return fmt.Errorf("services.%s: %w", name, err)
		}
	}
	return nil
}

// images is image work with o's output and credentials (nil: the runtime's
// own output).
func (rt *Runtime) images(o *backend.PrepareOptions) *images.Work {
	out := backend.PrepareOptions{Progress: rt.Progress, ProgressTTY: rt.ProgressTTY, Quiet: rt.Quiet}
	if o != nil {
		out = *o
	}
	return &images.Work{Engine: rt.Engine, Getenv: rt.Getenv, Owner: rt.Owner, Out: out}
}
