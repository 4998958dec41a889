package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/pool"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/engine"
)

// airlock prune (docs/prune.md): the daemon removes what no sandbox uses, of its
// own only (objects carrying its owner key):
//   - run sandboxes kept (airlock run --keep) and stopped or failed for longer
//     than runtime.event_retention_ttl, deleted as `airlock rm` would (events
//     sandbox.deleting and sandbox.deleted with reason "pruned"), first, so that
//     what they used is free for the rest;
//   - built images (airlock-build/*) no container uses, but the newest of each
//     project unless All, and none of a project with a sandbox being created;
//   - supervisor volumes of other builds than the daemon's that no container mounts.
// It works on the daemon's own Engine, every Engine it serves sandboxes on, and
// the caller's. Only one prune runs at a time.

// pruneMu serialises prunes.
var pruneMu sync.Mutex

// pruneClock, when set, is prune's clock (tests move it; see export_test.go).
var pruneClock atomic.Pointer[func() time.Time]

func pruneNow() time.Time {
	if f := pruneClock.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

// pruneDeleteTimeout bounds the wait for one kept sandbox's removal;
// pruneRetry is the wait before following it again.
const (
	pruneDeleteTimeout = 2 * time.Minute
	pruneRetry         = 50 * time.Millisecond
)

// PruneRequest asks what to prune (the API's prune request).
type PruneRequest struct {
	// DryRun lists what would be removed and removes nothing.
	DryRun bool
	// All removes the newest built image of each project too.
	All bool
	// Engine is one more Engine to prune (the caller's); nil for none.
	Engine *engine.Endpoint
}

// PruneResult is what prune removed (or would remove), and the space freed.
type PruneResult struct {
	DryRun    bool
	Removed   []PrunedObject
	Reclaimed int64
	// Errors are the objects that could not be removed, and why.
	Errors []string
}

// PrunedObject is one object prune removed.
type PrunedObject struct {
	Type    string // backend.PruneSandbox, PruneImage or PruneVolume
	Name    string // the sandbox's ID, the image's tag or the volume's name
	ID      string // the image's ID
	Project string
	Engine  string
	Size    int64 // the space it held alone, in bytes
}

// pruner is airlock prune. It sees of the daemon only these fields.
type pruner struct {
	store     *store.Store
	retention time.Duration
	ctx       func() context.Context // the daemon's, ended when it stops
	log       func() *slog.Logger
	pools     *pool.Pools
	// runtimes are the backends the daemon holds open, runtimeFor the one of
	// another Engine, rtOf the one of a sandbox.
	runtimes   func() []backend.Backend
	runtimeFor func(ep engine.Endpoint) backend.Backend
	rtOf       func(id string) backend.Backend
	delete     func(id, reason string) (Sandbox, error)
	attached   func(id string) bool // a client is attached to sandbox id
}

// newPruner returns the prune of s.
func newPruner(s *Service) *pruner {
	return &pruner{
		store: s.store, retention: s.cfg.retention(),
		ctx: func() context.Context { return s.ctx }, log: func() *slog.Logger { return s.log },
		pools: s.pools, runtimes: s.runtimes, runtimeFor: s.runtimeFor, rtOf: s.rtOf, delete: s.delete,
		attached: func(id string) bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.lives.attached[id] > 0
		},
	}
}

// Prune removes (or with req.DryRun lists) what no sandbox uses (pruner.prune).
func (s *Service) Prune(ctx context.Context, req *PruneRequest) (*PruneResult, error) {
	return s.pruner.prune(ctx, req)
}

// prune removes (or with req.DryRun lists) what no sandbox uses: the warm
// pools' parked sandboxes, kept sandboxes past retention, then on each Engine
// what the backend names.
func (p *pruner) prune(ctx context.Context, req *PruneRequest) (*PruneResult, error) {
	pruneMu.Lock()
	defer pruneMu.Unlock()
	res := &PruneResult{DryRun: req.DryRun, Removed: []PrunedObject{}}
	// The warm pools' parked sandboxes serve no one yet: drained (a run of
	// their manifest fills its pool again).
	for _, m := range p.pools.Parked() {
		res.Removed = append(res.Removed, PrunedObject{Type: backend.PruneSandbox, Name: m.ID, Project: m.Project, Engine: m.Engine})
	}
	if !req.DryRun {
		p.pools.Drain(ctx, "")
	}

	rts := p.runtimes()
	if req.Engine != nil && !req.Engine.IsZero() {
		if rt := p.runtimeFor(*req.Engine); !slices.Contains(rts, rt) {
			rts = append(rts, rt)
		}
	}
	usage := map[backend.Backend]*backend.DiskUsage{}
	for _, rt := range rts {
		usage[rt] = rt.DiskUsage(ctx)
	}

	kept, busy, err := p.kept()
	if err != nil {
		return nil, err
	}
	// Kept sandboxes first: once they are gone, what they used is free.
	leaving := map[string]bool{}
	reclaimed := p.removeKept(ctx, req, res, kept, usage, leaving)
	for _, rt := range rts {
		reclaimed += p.pruneOn(ctx, rt, usage[rt], req, res, backend.PruneOptions{All: req.All, Leaving: leaving, Busy: busy})
	}
	res.Reclaimed = reclaimed
	return res, nil
}

// kept returns the kept sandboxes past retention, oldest first, and the
// projects with a sandbox being created.
func (p *pruner) kept() (kept []store.Sandbox, busy map[string]bool, err error) {
	recs, err := p.store.List(store.Filter{})
	if err != nil {
		return nil, nil, err
	}
	now := pruneNow()
	busy = map[string]bool{}
	for _, rec := range recs {
		if rec.State == store.StatePending {
			busy[rec.Project] = true
		}
		if p.keptPast(rec, now, p.retention) {
			kept = append(kept, rec)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].UpdatedAt.Before(kept[j].UpdatedAt) })
	return kept, busy, nil
}

// removeKept deletes the kept sandboxes (with req.DryRun marks them leaving)
// and returns the space they freed; what could not be removed is in
// res.Errors.
func (p *pruner) removeKept(ctx context.Context, req *PruneRequest, res *PruneResult, kept []store.Sandbox, usage map[backend.Backend]*backend.DiskUsage, leaving map[string]bool) int64 {
	var reclaimed int64
	type pending struct {
		obj  PrunedObject
		done chan error
	}
	var deleting []pending
	for _, rec := range kept {
		rt, engineID := baseOf(p.rtOf(rec.ID), rec.ID)
		obj := PrunedObject{Type: backend.PruneSandbox, Name: rec.ID, Project: rec.Project,
			Engine: rt.Location().String(), Size: usage[rt].SandboxSize(engineID)}
		if req.DryRun {
			leaving[rec.ID] = true
			res.Removed = append(res.Removed, obj)
			reclaimed += obj.Size
			continue
		}
		if _, err := p.delete(rec.ID, "pruned"); err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("cannot remove sandbox %s: %v", rec.ID, err))
			continue
		}
		d := pending{obj: obj, done: make(chan error, 1)}
		go func() { d.done <- p.waitDeleted(ctx, rec.ID) }()
		deleting = append(deleting, d)
	}
	for _, d := range deleting {
		if err := <-d.done; err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("cannot remove sandbox %s: %v", d.obj.Name, err))
			continue
		}
		res.Removed = append(res.Removed, d.obj)
		reclaimed += d.obj.Size
	}
	return reclaimed
}

// pruneOn removes (or with req.DryRun lists) what the backend rt names
// unused, du its disk usage before, and returns the space freed.
func (p *pruner) pruneOn(ctx context.Context, rt backend.Backend, du *backend.DiskUsage, req *PruneRequest, res *PruneResult, opts backend.PruneOptions) int64 {
	cands, err := rt.PruneCandidates(ctx, opts, du)
	if err != nil {
		res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", rt.Location().String(), err))
		return 0
	}
	var reclaimed, imagesFreed int64
	removedImages := false
	for _, c := range cands {
		obj := PrunedObject{Type: c.Type, Name: c.Name, ID: c.ID, Project: c.Project, Engine: rt.Location().String(), Size: c.Size}
		if req.DryRun {
			res.Removed = append(res.Removed, obj)
			reclaimed += obj.Size
			continue
		}
		if ctx.Err() != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("cannot remove %s %s: %v", c.Type, c.Name, ctx.Err()))
			continue
		}
		freed, err := rt.PruneRemove(ctx, c)
		if err != nil {
			res.Errors = append(res.Errors, err.Error())
			if !freed {
				continue
			}
		}
		if !freed {
			obj.Size = 0
		}
		p.log().Info("pruned", "type", c.Type, "name", c.Name, "engine", rt.Location().String(), "size", obj.Size)
		res.Removed = append(res.Removed, obj)
		if c.Type == backend.PruneImage {
			removedImages = true
			imagesFreed += obj.Size
		} else {
			reclaimed += obj.Size
		}
	}
	// The images' sizes count only the layers no other image shared when
	// they were listed; layers the removed images shared among themselves
	// show in the Engine's total layer size, exact when nothing else built
	// or removed images meanwhile.
	if removedImages && du != nil {
		if after := rt.DiskUsage(ctx); after != nil && du.LayersSize-after.LayersSize > imagesFreed {
			imagesFreed = du.LayersSize - after.LayersSize
		}
	}
	return reclaimed + imagesFreed
}

// keptPast reports whether rec is a run sandbox kept (no CLI waits for it) and
// stopped or failed for longer than retention.
func (p *pruner) keptPast(rec store.Sandbox, now time.Time, retention time.Duration) bool {
	if rec.Kind != backend.KindRun || (rec.State != store.StateStopped && rec.State != store.StateFailed) {
		return false
	}
	if rec.CLIPid > 0 && processAlive(rec.CLIPid, rec.CLIStart) {
		return false // its CLI still handles it (copies --output, then removes it)
	}
	return !p.attached(rec.ID) && now.Sub(rec.UpdatedAt) > retention
}

// waitDeleted waits until sandbox id is deleted (or purged).
func (p *pruner) waitDeleted(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, pruneDeleteTimeout)
	defer cancel()
	// Each try follows the sandbox's events from its record; one that cannot
	// subscribe (a transition between Get and Subscribe) or whose subscription
	// is dropped looks again.
	err := backoff.Retry(func() error {
		rec, err := p.store.Get(id)
		if err != nil || rec.State == store.StateDeleted {
			return nil // deleted, or purged
		}
		backlog, live, stop, err := p.store.Subscribe(id, rec.LastSeq)
		if err != nil {
			return fmt.Errorf("cannot follow its removal: %w", err)
		}
		defer stop()
		for _, ev := range backlog {
			if ev.State == store.StateDeleted {
				return nil
			}
		}
		for {
			select {
			case ev, ok := <-live:
				if !ok {
					return errors.New("the subscription was dropped")
				}
				if ev.State == store.StateDeleted {
					return nil
				}
			case <-ctx.Done():
				return backoff.Permanent(fmt.Errorf("it is still being removed (%w); the daemon goes on", ctx.Err()))
			case <-p.ctx().Done():
				return backoff.Permanent(errors.New("the daemon stopped while it was being removed"))
			}
		}
	}, backoff.WithContext(backoff.NewConstantBackOff(pruneRetry), ctx))
	if err != nil && err == ctx.Err() {
		// The time was up between two tries.
		return fmt.Errorf("it is still being removed (%w); the daemon goes on", err)
	}
	return err
}
