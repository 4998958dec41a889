package docker

import (
	"context"
	"fmt"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/backend/docker/images"
	"github.com/airlock-dev/airlock/manifest"
)

// PlanHashFor returns the plan hash a sandbox made from r now would carry (the
// image is built or pulled when missing).
func (rt *Runtime) PlanHashFor(ctx context.Context, r *manifest.Resolved) (string, error) {
	_, img, err := rt.images(nil).Sandbox(ctx, r)
	if err != nil {
		return "", err
	}
	return backend.PlanHash(r, img.ID), nil
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
	imageRef, img, err := w.Sandbox(ctx, r)
	if err != nil {
		return err
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
