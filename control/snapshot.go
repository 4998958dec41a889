package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/internal/ids"
	"github.com/airlock-dev/airlock/manifest"
)

// Snapshots and forks (docs/snapshots.md): a snapshot is a sandbox's
// filesystems saved by its backend (backend.Snapshotter) with the manifest it
// was made from, in its wire form (every substituted value masked). A create
// from a snapshot is a create of that manifest with the snapshot's images in
// place of the primary's image (or build) and each service's; the values it
// needs come with the request. A fork is a snapshot and count creates from
// it, with the values the sandbox holds.

// Errors of snapshots, which the API maps onto its own reasons.
var (
	ErrSnapshotNotFound = errors.New("no such snapshot")
	ErrSnapshotExists   = errors.New("snapshot exists")
	ErrSnapshotInUse    = errors.New("snapshot in use")
	ErrNotSupported     = backend.ErrNotSupported // the one sentinel of the pause and snapshot routes
)

// maxFork bounds the copies one fork makes.
const maxFork = 64

// snapshotNameRE is a snapshot's name: an image repository's path component.
var snapshotNameRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)

// CheckSnapshotName says what is wrong with a snapshot name (nil: nothing).
func CheckSnapshotName(name string) error {
	if len(name) > 64 || !snapshotNameRE.MatchString(name) {
		return errorf(ErrInvalidRequest, "snapshot name %q: must be 1 to 64 lowercase letters, digits and separators (., _, -) between them", name)
	}
	return nil
}

// snapshotter is the backend of Engine ep as a Snapshotter.
func (s *Service) snapshotter(ep engine.Endpoint) (backend.Snapshotter, error) {
	rt := s.runtimeFor(ep)
	sn, ok := rt.(backend.Snapshotter)
	if !ok {
		return nil, errorf(ErrNotSupported, "cannot use snapshots on %s: not supported by this backend", ep.String())
	}
	return sn, nil
}

// snapshotError is err of a backend's snapshot call as the service's.
func snapshotError(name string, err error) error {
	switch {
	case errors.Is(err, backend.ErrSnapshotNotFound):
		return errorf(ErrSnapshotNotFound, "no such snapshot: %s", name)
	case errors.Is(err, backend.ErrSnapshotInUse):
		return errorf(ErrSnapshotInUse, "cannot delete snapshot %s: %v", name, err)
	case errors.Is(err, backend.ErrSnapshotExists):
		return errorf(ErrSnapshotExists, "cannot take snapshot %s: a snapshot of that name exists", name)
	}
	return err
}

// TakeSnapshot saves sandbox id's filesystems as snapshot name ("": one of
// the daemon's choosing). The sandbox may be ready or stopped.
func (s *Service) TakeSnapshot(ctx context.Context, id, name string) (backend.Snapshot, error) {
	snap, _, err := s.takeSnapshot(ctx, id, name)
	return snap, err
}

// takeSnapshot is TakeSnapshot, which also returns the sandbox's values and
// its record (for a fork).
func (s *Service) takeSnapshot(ctx context.Context, id, name string) (backend.Snapshot, map[string]string, error) {
	if name == "" {
		name = "snap-" + nonce()[:12]
	}
	if err := CheckSnapshotName(name); err != nil {
		return backend.Snapshot{}, nil, err
	}
	rec, err := s.store.Get(id)
	if err != nil {
		return backend.Snapshot{}, nil, err
	}
	if rec.State != store.StateReady && rec.State != store.StateStopped {
		return backend.Snapshot{}, nil, notIn(id, rec.State, "ready or stopped")
	}
	sn, err := s.snapshotter(s.endpointOf(rec))
	if err != nil {
		return backend.Snapshot{}, nil, err
	}
	l := s.lives.of(id)
	l.mu.Lock()
	defer l.mu.Unlock()
	wire, values := l.wire, maps.Clone(l.values)
	if len(wire.Resolved) == 0 {
		wire = manifest.Wire{ProjectDir: rec.Project, Resolved: json.RawMessage(rec.Plan), Sources: rec.Sources}
	}
	b, err := json.Marshal(wire)
	if err != nil {
		return backend.Snapshot{}, nil, fmt.Errorf("cannot take snapshot %s: %w", name, err)
	}
	h := l.handle
	if h == nil {
		if h, err = s.rtOf(id).Open(ctx, id, nil); err != nil {
			return backend.Snapshot{}, nil, fmt.Errorf("cannot take snapshot %s: %w", name, err)
		}
	}
	h = &backend.Sandbox{ID: id, PrimaryID: h.PrimaryID, Services: h.Services}
	snap, err := sn.Snapshot(ctx, h, backend.SnapshotRequest{Name: name, Manifest: b})
	if err != nil {
		return backend.Snapshot{}, nil, snapshotError(name, err)
	}
	s.events.emit(id, store.Event{Kind: "sandbox.snapshot", Extra: map[string]string{"snapshot": name}}, "")
	return *snap, values, nil
}

// Snapshots lists the snapshots on the daemon's own Engine.
func (s *Service) Snapshots(ctx context.Context) ([]backend.Snapshot, error) {
	sn, err := s.snapshotter(s.rt.Location())
	if err != nil {
		return nil, err
	}
	return sn.Snapshots(ctx, "")
}

// DeleteSnapshot removes snapshot name from the daemon's own Engine.
func (s *Service) DeleteSnapshot(ctx context.Context, name string) (backend.Snapshot, error) {
	if err := CheckSnapshotName(name); err != nil {
		return backend.Snapshot{}, err
	}
	sn, err := s.snapshotter(s.rt.Location())
	if err != nil {
		return backend.Snapshot{}, err
	}
	list, err := sn.Snapshots(ctx, name)
	if err != nil {
		return backend.Snapshot{}, err
	}
	if len(list) == 0 {
		return backend.Snapshot{}, errorf(ErrSnapshotNotFound, "no such snapshot: %s", name)
	}
	if err := sn.RemoveSnapshot(ctx, name); err != nil {
		return backend.Snapshot{}, snapshotError(name, err)
	}
	return list[0], nil
}

// fromSnapshot is req with the manifest of its snapshot, whose images replace
// the primary's and the services'.
func (s *Service) fromSnapshot(ctx context.Context, req *CreateRequest) (*CreateRequest, error) {
	name := req.FromSnapshot
	if req.Manifest != nil || req.Text != nil {
		return nil, errorf(ErrInvalidRequest, "from_snapshot: give a snapshot or a manifest, not both")
	}
	if err := CheckSnapshotName(name); err != nil {
		return nil, errorf(ErrInvalidRequest, "from_snapshot: %v", err)
	}
	ep := s.rt.Location()
	if req.Engine != nil {
		ep = *req.Engine
	}
	sn, err := s.snapshotter(ep)
	if err != nil {
		return nil, err
	}
	list, err := sn.Snapshots(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, errorf(ErrSnapshotNotFound, "from_snapshot: no such snapshot: %s", name)
	}
	snap := list[0]
	w, err := snapshotManifest(snap)
	if err != nil {
		return nil, err
	}
	var missing []string
	for k := range w.Sources {
		if _, ok := req.Secrets[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, errorf(ErrInvalidRequest, "from_snapshot: the manifest of snapshot %s has substituted values: give them in secrets (%s)", name, strings.Join(missing, ", "))
	}
	out := *req
	out.Manifest, out.FromSnapshot, out.fromSnapshot, out.NoPool = w, "", true, true
	if out.Kind == "" {
		out.Kind = backend.KindUp
	}
	return &out, nil
}

// snapshotManifest is the wire manifest a snapshot records with its images in
// place of the primary's and the services'.
func snapshotManifest(snap backend.Snapshot) (*manifest.Wire, error) {
	var w manifest.Wire
	if err := json.Unmarshal(snap.Manifest, &w); err != nil || len(w.Resolved) == 0 || snap.Primary.Image == "" {
		return nil, fmt.Errorf("cannot read snapshot %s: its manifest or primary image is missing", snap.Name)
	}
	m, err := manifest.DecodeJSON(w.Resolved)
	if err != nil {
		return nil, fmt.Errorf("cannot read the manifest of snapshot %s: %w", snap.Name, err)
	}
	m.Sandbox.Image, m.Sandbox.Build = snap.Primary.Image, nil
	for _, im := range snap.Services {
		svc, ok := m.Services[im.Service]
		if !ok {
			continue
		}
		svc.Image = im.Image
		m.Services[im.Service] = svc
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("cannot read the manifest of snapshot %s: %w", snap.Name, err)
	}
	w.Resolved = b
	return &w, nil
}

// Fork makes count copies of ready sandbox id: a snapshot of it, then count
// sandboxes created (and started) from it, with its labels and values, and
// with copyIDs as their IDs when given (count may then be 0).
func (s *Service) Fork(ctx context.Context, id string, count int, copyIDs []string) (backend.Snapshot, []Sandbox, error) {
	if count == 0 && len(copyIDs) > 0 {
		count = len(copyIDs)
	}
	if count < 1 || count > maxFork {
		return backend.Snapshot{}, nil, errorf(ErrInvalidRequest, "count: must be between 1 and %d, not %d", maxFork, count)
	}
	if err := checkForkIDs(copyIDs, count); err != nil {
		return backend.Snapshot{}, nil, err
	}
	rec, err := s.store.Get(id)
	if err != nil {
		return backend.Snapshot{}, nil, err
	}
	if rec.State != store.StateReady {
		return backend.Snapshot{}, nil, notIn(id, rec.State, store.StateReady)
	}
	snap, values, err := s.takeSnapshot(ctx, id, "fork-"+nonce()[:12])
	if err != nil {
		return backend.Snapshot{}, nil, err
	}
	var eng *engine.Endpoint
	if ep := s.endpointOf(rec); ep.Key() != s.rt.Location().Key() {
		eng = &ep
	}
	w, err := snapshotManifest(snap)
	if err != nil {
		return backend.Snapshot{}, nil, s.undoFork(rec, snap, nil, err)
	}
	out := make([]Sandbox, 0, count)
	for i := range count {
		if err := ctx.Err(); err != nil {
			return backend.Snapshot{}, nil, s.undoFork(rec, snap, out, fmt.Errorf("cannot fork sandbox %s: its client went away (%d of %d made): %w", id, len(out), count, err))
		}
		var copyID string
		if len(copyIDs) > 0 {
			copyID = copyIDs[i]
		}
		wc := *w
		sb, err := s.Create(ctx, &CreateRequest{ID: copyID, Kind: backend.KindUp, Manifest: &wc, Secrets: maps.Clone(values),
			Labels: maps.Clone(rec.Labels), Engine: eng, Start: true, NoPool: true, fromSnapshot: true})
		if err != nil {
			return backend.Snapshot{}, nil, s.undoFork(rec, snap, out, fmt.Errorf("cannot fork sandbox %s: copy %d of %d: %w", id, len(out)+1, count, err))
		}
		out = append(out, sb)
	}
	return snap, out, nil
}

// checkForkIDs checks the copies' IDs a fork names (none: the daemon's):
// count of them, valid, each once. Whether one is in use the creates find.
func checkForkIDs(copyIDs []string, count int) error {
	if len(copyIDs) == 0 {
		return nil
	}
	if len(copyIDs) != count {
		return errorf(ErrInvalidRequest, "ids: %d given for a count of %d: give one a copy", len(copyIDs), count)
	}
	seen := map[string]bool{}
	for i, c := range copyIDs {
		if err := ids.Validate(c); err != nil {
			return errorf(ErrInvalidRequest, "ids[%d]: %v", i, err)
		}
		if seen[c] {
			return errorf(ErrInvalidRequest, "ids[%d]: %q is given twice", i, c)
		}
		seen[c] = true
	}
	return nil
}

// forkUndoTimeout bounds the removal of what a failed fork made.
const forkUndoTimeout = 2 * time.Minute

// undoFork removes what a fork of sandbox rec made before it failed with
// cause: the copies (deleted, reason fork_failed, and waited for, so that
// their containers and networks are gone), then the fork's snapshot (its
// images). It returns cause, saying what could not be removed.
func (s *Service) undoFork(rec store.Sandbox, snap backend.Snapshot, made []Sandbox, cause error) error {
	ctx, cancel := context.WithTimeout(s.ctx, forkUndoTimeout)
	defer cancel()
	var left []string
	for _, sb := range made {
		// A copy still being made is let finish first: a delete during its
		// create could be recorded before the container it was making
		// appeared, and that container then ran on.
		s.awaitSettled(ctx, sb.Record.ID)
		if _, err := s.delete(sb.Record.ID, "fork_failed"); err != nil && !errors.Is(err, store.ErrNotFound) {
			left = append(left, "sandbox "+sb.Record.ID+": "+err.Error())
		}
	}
	for _, sb := range made {
		if err := s.awaitDeleted(ctx, sb.Record.ID); err != nil {
			left = append(left, "sandbox "+sb.Record.ID+": "+err.Error())
		}
	}
	if snap.Name != "" {
		if sn, err := s.snapshotter(s.endpointOf(rec)); err != nil {
			left = append(left, "snapshot "+snap.Name+": "+err.Error())
		} else if err := sn.RemoveSnapshot(ctx, snap.Name); err != nil && !errors.Is(err, backend.ErrSnapshotNotFound) {
			left = append(left, "snapshot "+snap.Name+": "+err.Error())
		}
	}
	s.log.Info("a fork failed: what it made is removed", "sandbox", rec.ID, "copies", len(made), "snapshot", snap.Name, "error", cause.Error(), "left", strings.Join(left, "; "))
	if len(left) > 0 {
		return fmt.Errorf("%w (and cannot remove what the fork made: %s)", cause, strings.Join(left, "; "))
	}
	return cause
}

// awaitSettled waits until sandbox id is no longer being made (its state is
// not pending), or ctx ends.
func (s *Service) awaitSettled(ctx context.Context, id string) {
	for {
		rec, err := s.store.Get(id)
		if err != nil || rec.State != store.StatePending {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// awaitDeleted waits until sandbox id is deleted (its record says so, or is
// gone).
func (s *Service) awaitDeleted(ctx context.Context, id string) error {
	for {
		rec, err := s.store.Get(id)
		if errors.Is(err, store.ErrNotFound) || err == nil && rec.State == store.StateDeleted {
			return nil
		}
		select {
		case <-ctx.Done():
			st := "unknown"
			if err == nil {
				st = rec.State
			}
			return fmt.Errorf("not deleted in time (state %s)", st)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
