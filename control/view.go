package control

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/manifest"
)

// Sandbox is what the service tells of a sandbox: its record, and what the
// daemon knows of it besides.
type Sandbox struct {
	Record store.Sandbox
	// Engine is the Docker Engine the sandbox lives on.
	Engine engine.Endpoint
	// DaemonNames are its enabled daemons, sorted; DaemonsUp how many of them
	// are up since it last started (while it is ready).
	DaemonNames []string
	DaemonsUp   int
	// Ports are its published ports as the Engine bound them when it last
	// started, while it is pending or ready.
	Ports []backend.Port
	// MainExitCode is a run's main command's code as its attached client got
	// it, while the sandbox is still pending or ready (its daemons shutting
	// down after a fast end, or its stop not yet recorded).
	MainExitCode *int
}

// view is what the service tells of a record.
func (s *Service) view(rec store.Sandbox) Sandbox {
	v := Sandbox{Record: rec, Engine: s.endpointOf(rec)}
	var plan manifest.Manifest
	if json.Unmarshal(rec.Plan, &plan) == nil {
		v.DaemonNames = slices.Sorted(maps.Keys(plan.Daemons))
	}
	if liveState(rec.State) {
		v.DaemonsUp = s.daemonsUp(rec.ID, len(v.DaemonNames))
	}
	if (liveState(rec.State) || rec.State == store.StatePending) && len(rec.Ports) > 0 {
		_ = json.Unmarshal(rec.Ports, &v.Ports)
	}
	if liveState(rec.State) || rec.State == store.StatePending {
		v.MainExitCode = s.mainExitCode(rec.ID)
	}
	return v
}

// mainExitCode is the code of a run's main command as its attached client got
// it (nil before that, or when this daemon did not see it).
func (s *Service) mainExitCode(id string) *int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.lives.m[id]; ok {
		return l.mainExit
	}
	return nil
}

// Get returns a sandbox.
func (s *Service) Get(id string) (Sandbox, error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return Sandbox{}, err
	}
	return s.view(rec), nil
}

// List returns the sandboxes with every label, deleted ones left out.
func (s *Service) List(labels map[string]string) ([]Sandbox, error) {
	recs, err := s.store.List(store.Filter{Labels: labels})
	if err != nil {
		return nil, err
	}
	out := make([]Sandbox, 0, len(recs))
	for _, r := range recs {
		out = append(out, s.view(r))
	}
	return out, nil
}

// recordPorts keeps the ports the Engine bound at a start with the sandbox's
// record, for ps (a random host port is known only then).
func (s *Service) recordPorts(id string, ports []backend.Port) {
	if ports == nil {
		ports = []backend.Port{}
	}
	b, err := json.Marshal(ports)
	if err != nil {
		return
	}
	if _, err := s.store.Update(id, func(r *store.Sandbox) error { r.Ports = b; return nil }); err != nil {
		s.log.Warn("cannot record the published ports", "sandbox", id, "error", err.Error())
	}
}

// daemonsUp counts the daemons whose last transition since the sandbox last
// started leaves them up: from memory, kept by ingestOne, or once from the events
// (a daemon that restarted).
func (s *Service) daemonsUp(id string, total int) int {
	l := s.lives.of(id)
	s.mu.Lock()
	known := l.up != nil
	s.mu.Unlock()
	if !known {
		evs, err := s.store.Events(id, 0)
		if err != nil {
			return 0
		}
		up := map[string]bool{}
		for _, e := range evs {
			markUp(up, e.Kind, e.Daemon)
		}
		s.mu.Lock()
		if l.up == nil {
			l.up = up
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, u := range l.up {
		if u {
			n++
		}
	}
	return min(n, total)
}

// markUp applies one event to the daemons-up map. A one-shot that completed
// counts as up: it did what it is for (ps shows 2/2, not 1/2, for a sandbox
// whose setup step and server are both fine).
func markUp(up map[string]bool, kind, daemon string) {
	switch kind {
	case "sandbox.started":
		clear(up)
	case "daemon.started", "daemon.ready", "daemon.completed":
		up[daemon] = true
	case "daemon.exited", "daemon.gave_up", "daemon.stopped", "daemon.killed":
		up[daemon] = false
	}
}
