package control

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/client"
)

// The snapshot routes (snapshot.go): POST /v1/sandboxes/{id}/snapshots,
// GET /v1/snapshots, DELETE /v1/snapshots/{name}, POST /v1/sandboxes/{id}/fork.

// snapshotDomain is what the snapshot routes need of the domain (a *Service
// is one).
type snapshotDomain interface {
	TakeSnapshot(ctx context.Context, id, name string) (backend.Snapshot, error)
	Snapshots(ctx context.Context) ([]backend.Snapshot, error)
	DeleteSnapshot(ctx context.Context, name string) (backend.Snapshot, error)
	Fork(ctx context.Context, id string, count int, ids []string) (backend.Snapshot, []Sandbox, error)
}

var _ snapshotDomain = (*Service)(nil)

// snapshots is the domain's snapshotDomain; ok false (a 501 written) when it
// has none.
func (s *server) snapshots(w http.ResponseWriter) (snapshotDomain, bool) {
	d, ok := s.svc.(snapshotDomain)
	if !ok {
		writeError(w, &client.Error{Reason: client.ReasonNotSupported, Message: "cannot use snapshots: this daemon has none"})
	}
	return d, ok
}

func (s *server) takeSnapshot(w http.ResponseWriter, r *http.Request) {
	d, ok := s.snapshots(w)
	if !ok {
		return
	}
	var req client.SnapshotRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			writeError(w, err)
			return
		}
	}
	snap, err := d.TakeSnapshot(r.Context(), r.PathValue("id"), req.Name)
	if err != nil {
		writeSnapshotError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toClientSnapshot(snap))
}

func (s *server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	d, ok := s.snapshots(w)
	if !ok {
		return
	}
	list, err := d.Snapshots(r.Context())
	if err != nil {
		writeSnapshotError(w, err)
		return
	}
	out := make([]client.Snapshot, 0, len(list))
	for _, sn := range list {
		out = append(out, toClientSnapshot(sn))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	d, ok := s.snapshots(w)
	if !ok {
		return
	}
	snap, err := d.DeleteSnapshot(r.Context(), r.PathValue("name"))
	if err != nil {
		writeSnapshotError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toClientSnapshot(snap))
}

func (s *server) fork(w http.ResponseWriter, r *http.Request) {
	d, ok := s.snapshots(w)
	if !ok {
		return
	}
	var req client.ForkRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	snap, list, err := d.Fork(r.Context(), r.PathValue("id"), req.Count, req.IDs)
	if err != nil {
		writeSnapshotError(w, err)
		return
	}
	out := client.Fork{Snapshot: toClientSnapshot(snap), Sandboxes: make([]client.Sandbox, 0, len(list))}
	for _, sb := range list {
		out.Sandboxes = append(out.Sandboxes, toClientSandbox(sb))
	}
	writeJSON(w, http.StatusAccepted, out)
}

// writeSnapshotError writes an error of the snapshot routes: theirs with
// reasons of their own, the others as every route does.
func writeSnapshotError(w http.ResponseWriter, err error) {
	for _, m := range []struct {
		err    error
		reason string
	}{
		{ErrSnapshotNotFound, client.ReasonSnapshotNotFound},
		{ErrSnapshotExists, client.ReasonSnapshotExists},
		{ErrSnapshotInUse, client.ReasonSnapshotInUse},
		{ErrNotSupported, client.ReasonNotSupported},
	} {
		if errors.Is(err, m.err) {
			writeError(w, &client.Error{Reason: m.reason, Message: err.Error()})
			return
		}
	}
	writeError(w, err)
}

// toClientSnapshot is the API's view of a snapshot.
func toClientSnapshot(sn backend.Snapshot) client.Snapshot {
	out := client.Snapshot{Name: sn.Name, Sandbox: sn.Sandbox, CreatedAt: sn.CreatedAt,
		Primary: client.SnapshotImage(sn.Primary), Services: []client.SnapshotImage{}}
	for _, im := range sn.Services {
		out.Services = append(out.Services, client.SnapshotImage(im))
	}
	var m client.Manifest
	if len(sn.Manifest) > 0 && json.Unmarshal(sn.Manifest, &m) == nil {
		out.Manifest = &m
	}
	return out
}
