package trust

import (
	"path/filepath"
	"slices"
	"time"
)

// Change is a layer file whose content differs from the accepted one.
type Change struct {
	Path string
	// Old is the accepted content; nil when the file was no layer then.
	Old *File
	New File
	// Inside: it changed while a sandbox could write it; Sandbox names that
	// sandbox ("" when its ID was not known yet).
	Inside  bool
	Sandbox string
}

// resolveOpen asks resolve about every open session, without the lock held (it
// may talk to the daemon), and returns what it said by serial.
func (s *Store) resolveOpen(resolve Resolver) (map[uint64]Status, error) {
	var open []*Session
	err := s.view(func(st *state) error {
		for _, ss := range st.Sessions {
			if ss.Ended.IsZero() {
				c := *ss
				open = append(open, &c)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := map[uint64]Status{}
	for _, ss := range open {
		if resolve != nil {
			out[ss.Serial] = resolve(ss)
		} else {
			out[ss.Serial] = Status{Running: true}
		}
	}
	return out, nil
}

// applyStatus closes the sessions whose sandbox ended.
func (s *Store) applyStatus(st *state, status map[uint64]Status) {
	now := s.now()
	for _, ss := range st.Sessions {
		r, ok := status[ss.Serial]
		if !ok || r.Running || !ss.Ended.IsZero() {
			continue
		}
		ss.Ended = r.Ended
		if ss.Ended.IsZero() || ss.Ended.After(now) {
			ss.Ended = now
		}
	}
}

// Check compares snap, the layers of manifest (a project in dir) as just read,
// with the accepted ones. Changes made while no sandbox could write them are
// accepted; when none was made inside a sandbox, the whole snapshot is accepted
// and Check returns nil. Otherwise it returns every change, those made inside
// a sandbox with Inside set, and accepts nothing: see Accept. A manifest seen
// for the first time is accepted as it is.
func (s *Store) Check(manifest, dir string, snap *Snapshot, resolve Resolver) ([]Change, error) {
	return s.evaluate(manifest, dir, snap, resolve, true)
}

// Review is Check that accepts nothing, whatever it finds: `airlock trust`
// shows its changes before it accepts them.
func (s *Store) Review(manifest, dir string, snap *Snapshot, resolve Resolver) ([]Change, error) {
	return s.evaluate(manifest, dir, snap, resolve, false)
}

func (s *Store) evaluate(manifest, dir string, snap *Snapshot, resolve Resolver, accept bool) ([]Change, error) {
	// The usual case needs no Resolver (which may ask the daemon): the layers
	// are as accepted, or the manifest is new. Open sessions are resolved
	// then only when many piled up (runs leave theirs to the daemon's word).
	done, open := false, 0
	var status map[uint64]Status
	err := s.modify(func(st *state) (bool, error) {
		for _, ss := range st.Sessions {
			if ss.Ended.IsZero() {
				open++
			}
		}
		p := st.Projects[manifest]
		switch {
		case p == nil && !coveredByAny(st, snap):
			done = true
			if accept {
				s.accept(st, manifest, dir, snap)
			}
			return accept, nil
		case p == nil:
			// First seen, but a sandbox could have written it: judged below.
		case unchanged(p, snap):
			// Nothing to write: the accepted layers and their time stay
			// (an older acceptance only makes the windows wider).
			done = true
		}
		return false, nil
	})
	if err != nil || done && open <= maxOpenUnresolved {
		return nil, err
	}
	status, err = s.resolveOpen(resolve)
	if err != nil {
		return nil, err
	}
	if done {
		return nil, s.update(func(st *state) error { s.applyStatus(st, status); return nil })
	}
	var out []Change
	err = s.update(func(st *state) error {
		s.applyStatus(st, status)
		p := st.Projects[manifest]
		if p == nil {
			if !accept {
				// Review: what a check would flag, without keeping a record.
				cp := *st
				cp.Projects = map[string]*project{}
				out = s.firstSeen(&cp, manifest, dir, snap)
				return nil
			}
			if out = s.firstSeen(st, manifest, dir, snap); out == nil {
				s.accept(st, manifest, dir, snap)
			}
			return nil
		}
		out = s.changes(st, p, snap)
		inside := slices.ContainsFunc(out, func(c Change) bool { return c.Inside })
		if accept && !inside {
			s.accept(st, manifest, dir, snap)
			out = nil
		}
		return nil
	})
	return out, err
}

// maxOpenUnresolved is how many open sessions may wait for a change to be
// resolved; past it, every check asks about them.
const maxOpenUnresolved = 32

// unchanged reports whether every layer of snap is as accepted in p, and none is flagged.
func unchanged(p *project, snap *Snapshot) bool {
	if len(p.Flagged) > 0 {
		return false
	}
	for path, nf := range snap.Files {
		of, had := p.Accepted[path]
		if had && !of.Same(nf) || !had && !nf.Absent {
			return false
		}
	}
	return true
}

// changes lists the layers of snap that differ from p's accepted ones, flagging
// (in p) those a session could have written.
func (s *Store) changes(st *state, p *project, snap *Snapshot) []Change {
	if p.Flagged == nil {
		p.Flagged = map[string]Flag{}
	}
	now := s.now()
	var out []Change
	for _, path := range snap.Paths() {
		nf := snap.Files[path]
		of, had := p.Accepted[path]
		if had && of.Same(nf) || !had && nf.Absent {
			delete(p.Flagged, path)
			continue
		}
		c := Change{Path: path, New: nf}
		if had {
			c.Old = &of
		}
		if f, ok := p.Flagged[path]; ok {
			c.Inside, c.Sandbox = true, f.Sandbox
		} else if ss := s.writer(st, p, path, nf); ss != nil {
			c.Inside, c.Sandbox = true, ss.Sandbox
			p.Flagged[path] = Flag{Sandbox: ss.Sandbox, At: now}
		}
		out = append(out, c)
	}
	return out
}

// writer returns a session that could have written path when it changed since
// p was accepted, or nil.
// A nil p is a manifest seen for the first time: every session counts.
func (s *Store) writer(st *state, p *project, path string, nf File) *Session {
	changed, known := time.Time{}, false
	if !nf.Absent {
		changed, known = s.ctime(path)
	}
	// A removal changed the folder: the folder's last change is the latest
	// it can have been made.
	removedBy, removedKnown := time.Time{}, false
	if nf.Absent {
		removedBy, removedKnown = s.ctime(filepath.Dir(path))
	}
	real := resolvePath(path)
	for _, ss := range st.Sessions {
		if !covers(ss.Roots, real) {
			continue
		}
		if !ss.Sealed.IsZero() && slices.Contains(ss.Protected, path) {
			// Read-only in its sandbox until the main command ended, when the
			// CLI found it as accepted: what changed it since is the user's.
			continue
		}
		lo := ss.Started
		if p != nil && p.AcceptedAt.After(lo) {
			lo = p.AcceptedAt
		}
		lo = lo.Add(-Lag)
		hi := time.Time{}
		if !ss.Ended.IsZero() {
			hi = ss.Ended
			if hi.Before(lo) {
				continue // it ended before the layers were accepted
			}
		}
		if nf.Absent {
			if removedKnown && removedBy.Before(lo) {
				continue // removed before it started
			}
			return ss
		}
		if !known {
			return ss // not examinable: when is not known
		}
		if !changed.Before(lo) && (hi.IsZero() || !changed.After(hi)) {
			return ss
		}
	}
	return nil
}

// firstSeen judges the layers of a manifest that has no record: a file a
// session could have written while it ran (a sandbox that planted a
// sandbox.toml in a folder it could write) is a change from nothing, flagged;
// when there is none, it returns nil and the layers are accepted as they are.
// Flagged files are kept in a record that accepts nothing yet.
func (s *Store) firstSeen(st *state, manifest, dir string, snap *Snapshot) []Change {
	var out []Change
	p := &project{Dir: dir, Accepted: map[string]File{}, Flagged: map[string]Flag{}}
	for _, path := range snap.Paths() {
		nf := snap.Files[path]
		if nf.Absent {
			continue
		}
		if ss := s.writer(st, nil, path, nf); ss != nil {
			p.Flagged[path] = Flag{Sandbox: ss.Sandbox, At: s.now()}
			out = append(out, Change{Path: path, New: nf, Inside: true, Sandbox: ss.Sandbox})
		}
	}
	if len(out) == 0 {
		return nil
	}
	for _, path := range snap.Paths() {
		if _, flagged := p.Flagged[path]; !flagged {
			c := Change{Path: path, New: snap.Files[path]}
			if !c.New.Absent {
				out = append(out, c)
			}
		}
	}
	st.Projects[manifest] = p
	return out
}

// coveredByAny reports whether a session (open or ended) could write a file of snap.
func coveredByAny(st *state, snap *Snapshot) bool {
	for path, f := range snap.Files {
		if f.Absent {
			continue
		}
		real := resolvePath(path)
		for _, ss := range st.Sessions {
			if covers(ss.Roots, real) {
				return true
			}
		}
	}
	return false
}

func (s *Store) accept(st *state, manifest, dir string, snap *Snapshot) {
	p := &project{Dir: dir, Accepted: map[string]File{}, AcceptedAt: s.now()}
	for path, f := range snap.Files {
		p.Accepted[path] = f
	}
	st.Projects[manifest] = p
}

// Accept records snap as the trusted layers of manifest, flags cleared.
func (s *Store) Accept(manifest, dir string, snap *Snapshot) error {
	return s.update(func(st *state) error {
		s.accept(st, manifest, dir, snap)
		return nil
	})
}

// Accepted returns the accepted content of manifest's layers (nil when the
// manifest was never seen), for a diff or to load the accepted manifest.
func (s *Store) Accepted(manifest string) (map[string]File, error) {
	var out map[string]File
	err := s.view(func(st *state) error {
		if p := st.Projects[manifest]; p != nil {
			out = p.Accepted
		}
		return nil
	})
	return out, err
}
