package control

import (
	"encoding/json"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/engine"
)

// The daemon serves sandboxes on whichever Engine each was created on (design.md §7):
// the record keeps the Engine's endpoint, and the daemon keeps one runtime (and one
// Engine event watcher) per Engine it has seen, its own default included.

// endpointOf is the Engine a sandbox was created on: the daemon's own when the
// record names none (made before Engines were recorded). A cluster recorded by
// an earlier daemon, packed in the endpoint's Host, is read into the typed form
// (engine.Normalize); one that cannot be read is the daemon's own too.
func (s *Service) endpointOf(rec store.Sandbox) engine.Endpoint {
	var ep engine.Endpoint
	if len(rec.Engine) == 0 || json.Unmarshal(rec.Engine, &ep) != nil {
		return s.rt.Location()
	}
	ep, err := engine.Normalize(ep)
	if err != nil || ep.IsZero() {
		return s.rt.Location()
	}
	return ep
}

// rtOf returns the runtime of the Engine sandbox id lives on.
func (s *Service) rtOf(id string) backend.Backend {
	rec, err := s.store.Get(id)
	if err != nil {
		return s.rt
	}
	rt := s.runtimeFor(s.endpointOf(rec))
	if rec.EngineID != "" && rec.EngineID != id {
		return aliased{Backend: rt, id: id, engineID: rec.EngineID} // alias.go
	}
	return rt
}

// runtimeFor returns the runtime of an Engine, opening it (and watching its events)
// the first time. An Engine that cannot be opened (its TLS files are gone, say)
// falls back to the daemon's own, with an error in the log.
func (s *Service) runtimeFor(ep engine.Endpoint) backend.Backend {
	key := ep.Key()
	if key == s.rt.Location().Key() || s.cfg.OpenEngine == nil {
		return s.rt
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rt, ok := s.engines[key]; ok {
		return rt
	}
	rt, err := s.cfg.OpenEngine(ep)
	if err != nil {
		s.log.Error("cannot open a Docker Engine; using the daemon's own", "engine", ep.String(), "error", err.Error())
		return s.rt
	}
	rt.SetHooks(s.serviceResult, s.recordStep)
	s.engines[key] = rt
	if s.ctx != nil && s.ctx.Err() == nil {
		s.goAsync(func() { s.status.watchEngine(rt) })
	}
	return rt
}

// runtimes are every Engine's runtime the daemon opened, its own first.
func (s *Service) runtimes() []backend.Backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []backend.Backend{s.rt}
	for _, rt := range s.engines {
		out = append(out, rt)
	}
	return out
}
