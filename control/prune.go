package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/airlock-dev/airlock/backend"
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

// Prune removes (or with req.DryRun lists) what no sandbox uses.
func (s *Service) Prune(ctx context.Context, req *PruneRequest) (*PruneResult, error) {
	pruneMu.Lock()
	defer pruneMu.Unlock()
	res := &PruneResult{DryRun: req.DryRun, Removed: []PrunedObject{}}
	// The warm pools' parked sandboxes serve no one yet: drained (a run of
	// their manifest fills its pool again).
	for _, m := range s.pools.Parked() {
		res.Removed = append(res.Removed, PrunedObject{Type: backend.PruneSandbox, Name: m.ID, Project: m.Project, Engine: m.Engine})
	}
	if !req.DryRun {
		s.pools.Drain(ctx, "")
	}

	rts := s.runtimes()
	if req.Engine != nil && req.Engine.Host != "" {
		if rt := s.runtimeFor(*req.Engine); !slices.Contains(rts, rt) {
			rts = append(rts, rt)
		}
	}
	usage := map[backend.Backend]*backend.DiskUsage{}
	for _, rt := range rts {
		usage[rt] = rt.DiskUsage(ctx)
	}

	recs, err := s.store.List(store.Filter{})
	if err != nil {
		return nil, err
	}
	now, retention := pruneNow(), s.cfg.retention()
	busy := map[string]bool{}
	var kept []store.Sandbox
	for _, rec := range recs {
		if rec.State == store.StatePending {
			busy[rec.Project] = true
		}
		if s.keptPast(rec, now, retention) {
			kept = append(kept, rec)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].UpdatedAt.Before(kept[j].UpdatedAt) })

	// Kept sandboxes first: once they are gone, what they used is free.
	leaving := map[string]bool{}
	var reclaimed int64
	type pending struct {
		obj  PrunedObject
		done chan error
	}
	var deleting []pending
	for _, rec := range kept {
		rt := s.rtOf(rec.ID)
		obj := PrunedObject{Type: backend.PruneSandbox, Name: rec.ID, Project: rec.Project,
			Engine: rt.Location().String(), Size: usage[rt].SandboxSize(rec.ID)}
		if req.DryRun {
			leaving[rec.ID] = true
			res.Removed = append(res.Removed, obj)
			reclaimed += obj.Size
			continue
		}
		if _, err := s.delete(rec.ID, "pruned"); err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("cannot remove sandbox %s: %v", rec.ID, err))
			continue
		}
		p := pending{obj: obj, done: make(chan error, 1)}
		go func() { p.done <- s.waitDeleted(ctx, rec.ID) }()
		deleting = append(deleting, p)
	}
	for _, p := range deleting {
		if err := <-p.done; err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("cannot remove sandbox %s: %v", p.obj.Name, err))
			continue
		}
		res.Removed = append(res.Removed, p.obj)
		reclaimed += p.obj.Size
	}

	for _, rt := range rts {
		du := usage[rt]
		cands, err := rt.PruneCandidates(ctx, backend.PruneOptions{All: req.All, Leaving: leaving, Busy: busy}, du)
		if err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", rt.Location().String(), err))
			continue
		}
		var imagesFreed int64
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
			s.log.Info("pruned", "type", c.Type, "name", c.Name, "engine", rt.Location().String(), "size", obj.Size)
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
		reclaimed += imagesFreed
	}
	res.Reclaimed = reclaimed
	return res, nil
}

// keptPast reports whether rec is a run sandbox kept (no CLI waits for it) and
// stopped or failed for longer than retention.
func (s *Service) keptPast(rec store.Sandbox, now time.Time, retention time.Duration) bool {
	if rec.Kind != backend.KindRun || (rec.State != store.StateStopped && rec.State != store.StateFailed) {
		return false
	}
	if rec.CLIPid > 0 && processAlive(rec.CLIPid, rec.CLIStart) {
		return false // its CLI still handles it (copies --output, then removes it)
	}
	s.mu.Lock()
	attached := s.attached[rec.ID] > 0
	s.mu.Unlock()
	return !attached && now.Sub(rec.UpdatedAt) > retention
}

// waitDeleted waits until sandbox id is deleted (or purged).
func (s *Service) waitDeleted(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, pruneDeleteTimeout)
	defer cancel()
	// Each try follows the sandbox's events from its record; one that cannot
	// subscribe (a transition between Get and Subscribe) or whose subscription
	// is dropped looks again.
	err := backoff.Retry(func() error {
		rec, err := s.store.Get(id)
		if err != nil || rec.State == store.StateDeleted {
			return nil // deleted, or purged
		}
		backlog, live, stop, err := s.store.Subscribe(id, rec.LastSeq)
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
			case <-s.ctx.Done():
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
