package control

import (
	"context"
	"slices"
	"sync"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/manifest"
)

// A sandbox claimed from a warm pool keeps the Engine objects of the parked
// sandbox: its containers, network and volumes are named and labelled by the
// ID it was parked under, and an Engine renames neither a network nor a
// label. When the create named an ID of its own, that ID is the sandbox's
// everywhere the daemon answers (its record, events, execs, files, ps) and
// the record names the Engine's (store.Sandbox.EngineID): the backend is asked
// by the Engine's ID (aliased), and what it reports by that ID (a service's
// result, a step, a primary's death) is the record's (aliases).

// aliases maps the Engine IDs of claimed sandboxes to the IDs of their records.
type aliases struct {
	mu sync.Mutex
	m  map[string]string // Engine ID → record ID
}

// add records that sandbox id's Engine objects are named by engineID.
func (a *aliases) add(engineID, id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]string{}
	}
	a.m[engineID] = id
}

// of is the record ID of the sandbox whose Engine objects engineID names (ok
// false: none was claimed under another ID).
func (a *aliases) of(engineID string) (id string, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id, ok = a.m[engineID]
	return id, ok
}

// load reads the aliases of the store's records (when the daemon starts).
func (a *aliases) load(st *store.Store) {
	recs, err := st.List(store.Filter{})
	if err != nil {
		return
	}
	for _, rec := range recs {
		if rec.EngineID != "" && rec.EngineID != rec.ID {
			a.add(rec.EngineID, rec.ID)
		}
	}
}

// recordID is the ID of the record of the sandbox the backend names id: id
// itself, or the caller's ID of a sandbox claimed under one. ok is false when
// the store has no such sandbox (a pooled one being made, say).
func (s *Service) recordID(id string) (string, bool) {
	if _, err := s.store.Get(id); err == nil {
		return id, true
	}
	return s.aliases.of(id)
}

// aliased is the backend of a sandbox whose Engine objects are named by
// another ID than its record's: the calls that take the sandbox's ID are
// made with the Engine's.
type aliased struct {
	backend.Backend
	id, engineID string
}

// obj is the Engine's ID for the sandbox ID id.
func (a aliased) obj(id string) string {
	if id == a.id {
		return a.engineID
	}
	return id
}

func (a aliased) Open(ctx context.Context, id string, r *manifest.Resolved) (*backend.Sandbox, error) {
	return a.Backend.Open(ctx, a.obj(id), r)
}

func (a aliased) Stop(ctx context.Context, id string) error { return a.Backend.Stop(ctx, a.obj(id)) }

func (a aliased) Remove(ctx context.Context, id string) error {
	return a.Backend.Remove(ctx, a.obj(id))
}

func (a aliased) RemoveContainers(ctx context.Context, id string) error {
	return a.Backend.RemoveContainers(ctx, a.obj(id))
}

func (a aliased) RemoveNetworks(ctx context.Context, id string) error {
	return a.Backend.RemoveNetworks(ctx, a.obj(id))
}

func (a aliased) Get(ctx context.Context, id string) (*backend.Info, error) {
	in, err := a.Backend.Get(ctx, a.obj(id))
	if in != nil && in.ID == a.engineID {
		c := *in
		c.ID = a.id
		in = &c
	}
	return in, err
}

func (a aliased) FollowEgress(ctx context.Context, id string, denied func(backend.EgressDenial)) error {
	return a.Backend.FollowEgress(ctx, a.obj(id), denied)
}

// baseOf is the backend under an aliased one (the Engine's, one per Engine:
// gates and disk usage are kept by it), and the Engine's ID for id.
func baseOf(rt backend.Backend, id string) (backend.Backend, string) {
	if a, ok := rt.(aliased); ok {
		return a.Backend, a.obj(id)
	}
	return rt, id
}

// claimedFromPool says whether sandbox id was a parked one a create took
// (its history has pool.claimed).
func (s *Service) claimedFromPool(id string) bool {
	evs, err := s.store.Events(id, 0)
	return err == nil && slices.ContainsFunc(evs, func(e store.Event) bool { return e.Kind == "pool.claimed" })
}

func (a aliased) SyncEgress(ctx context.Context, id string) error {
	if s, ok := a.Backend.(backend.EgressSyncer); ok {
		return s.SyncEgress(ctx, a.obj(id))
	}
	return nil
}
