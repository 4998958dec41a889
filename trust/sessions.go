package trust

import (
	"slices"
	"time"
)

// Session is one sandbox the CLI started (or resumed).
type Session struct {
	Serial   uint64 `json:"serial"`
	Manifest string `json:"manifest"`
	// Sandbox is its ID, once the daemon gave one.
	Sandbox string `json:"sandbox,omitempty"`
	// Roots are the host paths it can write, symbolic links resolved.
	Roots []string `json:"roots,omitempty"`
	// PID and PIDStart name the CLI that started it, while Sandbox is unknown.
	PID      int       `json:"pid,omitempty"`
	PIDStart string    `json:"pid_start,omitempty"`
	Started  time.Time `json:"started"`
	// Ended is zero while it may run.
	Ended time.Time `json:"ended,omitzero"`
	// Protected are the layer files that existed when it started and that
	// its sandbox sees read-only (run): code in it cannot change them.
	Protected []string `json:"protected,omitempty"`
	// Sealed is when the CLI compared the layers as its main command ended
	// (run): its protected files changed after that are the user's, whatever
	// its daemons still do until Ended.
	Sealed time.Time `json:"sealed,omitzero"`
	// Pool marks the session of a manifest's warm pool: its parked sandboxes,
	// from the first one's creation until the pool holds none.
	Pool bool `json:"pool,omitempty"`
}

// Status is what became of an open session's sandbox.
type Status struct {
	// Running: it runs, or whether it does cannot be told now.
	Running bool
	// Ended is when it stopped; zero when not known (now is taken).
	Ended time.Time
}

// Resolver tells whether an open session's sandbox still runs.
type Resolver func(*Session) Status

// Flag marks a layer changed inside a sandbox, until it is accepted.
type Flag struct {
	Sandbox string    `json:"sandbox,omitempty"`
	At      time.Time `json:"at"`
}

// Begin records a session of manifest that can write roots, started now by the
// CLI process pid (pidStart tells a reused pid apart), of sandbox id when it is
// known already (else see SetSandbox).
// protected are the layer files its sandbox sees read-only.
func (s *Store) Begin(manifest string, roots, protected []string, pid int, pidStart, id string) (*Session, error) {
	ss := &Session{Manifest: manifest, PID: pid, PIDStart: pidStart, Started: s.now(), Sandbox: id}
	for _, r := range roots {
		ss.Roots = append(ss.Roots, resolvePath(r))
	}
	for _, p := range protected {
		ss.Protected = append(ss.Protected, clean(p))
	}
	err := s.update(func(st *state) error {
		st.NextSerial++
		ss.Serial = st.NextSerial
		st.Sessions = append(st.Sessions, ss)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ss, nil
}

// BeginPool records the session of manifest's warm pool, unless one is open:
// its parked sandboxes can write roots from their creation until they are
// removed, which the Resolver tells (the daemon's pools). The protected files
// are read-only in them: a change of those is never theirs.
func (s *Store) BeginPool(manifest string, roots, protected []string) error {
	now := s.now()
	return s.modify(func(st *state) (bool, error) {
		for _, ss := range st.Sessions {
			if ss.Pool && ss.Manifest == manifest && ss.Ended.IsZero() {
				return false, nil // open already: nothing to write
			}
		}
		ss := &Session{Manifest: manifest, Started: now, Sealed: now, Pool: true}
		for _, r := range roots {
			ss.Roots = append(ss.Roots, resolvePath(r))
		}
		for _, p := range protected {
			ss.Protected = append(ss.Protected, clean(p))
		}
		st.NextSerial++
		ss.Serial = st.NextSerial
		st.Sessions = append(st.Sessions, ss)
		return true, nil
	})
}

// SetSandbox names the sandbox of a session.
func (s *Store) SetSandbox(serial uint64, id string) error {
	return s.update(func(st *state) error {
		for _, ss := range st.Sessions {
			if ss.Serial == serial {
				ss.Sandbox = id
			}
		}
		return nil
	})
}

// Drop forgets a session whose sandbox never ran.
func (s *Store) Drop(serial uint64) error {
	return s.update(func(st *state) error {
		st.Sessions = slices.DeleteFunc(st.Sessions, func(ss *Session) bool { return ss.Serial == serial })
		return nil
	})
}

// Ended compares snap, read as the session's main command ended, with the
// accepted layers of its manifest: a difference was made inside the sandbox
// and is flagged whatever the file times say. The session is sealed then: its
// protected files (read-only in its sandbox) changed later are the user's.
// With closed, the session ends (its sandbox is stopped); otherwise it stays
// open, for its other files, until a Resolver says its sandbox is gone
// (daemons may still run). It returns the flagged changes.
//
// The seal and the end are at time at, when the CLI learnt the main command's
// end (nothing of the sandbox wrote after it, unless daemons still run),
// rather than now, once the layers were read: the wait for the file clock to
// pass the end (settle) is then mostly over. A zero at, or one before the
// session started or after now, is taken as now.
func (s *Store) Ended(serial uint64, snap *Snapshot, closed bool, at time.Time) ([]Change, error) {
	var out []Change
	var end time.Time
	defer func() { s.settle(end) }()
	err := s.modify(func(st *state) (bool, error) {
		var ss *Session
		for _, x := range st.Sessions {
			if x.Serial == serial {
				ss = x
			}
		}
		if ss == nil {
			return false, nil
		}
		if now := s.now(); at.IsZero() || at.Before(ss.Started) || at.After(now) {
			at = now
		}
		save := false
		if ss.Sealed.IsZero() {
			ss.Sealed = at
			save = true
		}
		if closed && ss.Ended.IsZero() {
			ss.Ended = at
			end = ss.Ended
			save = true
		}
		p := st.Projects[ss.Manifest]
		if p == nil {
			return save, nil
		}
		if p.Flagged == nil {
			p.Flagged = map[string]Flag{}
		}
		for _, path := range snap.Paths() {
			nf := snap.Files[path]
			of, had := p.Accepted[path]
			if had && of.Same(nf) || !had && nf.Absent {
				continue
			}
			if _, ok := p.Flagged[path]; !ok {
				p.Flagged[path] = Flag{Sandbox: ss.Sandbox, At: s.now()}
			}
			c := Change{Path: path, New: nf, Inside: true, Sandbox: p.Flagged[path].Sandbox}
			if had {
				c.Old = &of
			}
			out = append(out, c)
			save = true
		}
		return save, nil
	})
	return out, err
}

// Stopped closes the open sessions of sandbox id, which the CLI just saw
// stop, and judges the layers of their manifests now, as a check would: what
// changed while it ran is flagged at once, so that a later edit of the file
// does not hide it. It returns the changes flagged.
func (s *Store) Stopped(id string) ([]Change, error) {
	var out []Change
	var end time.Time
	defer func() { s.settle(end) }()
	err := s.update(func(st *state) error {
		manifests := map[string]bool{}
		for _, ss := range st.Sessions {
			if ss.Sandbox == id && ss.Ended.IsZero() {
				ss.Ended = s.now()
				end = ss.Ended
				manifests[ss.Manifest] = true
			}
		}
		for m := range manifests {
			p := st.Projects[m]
			if p == nil {
				continue
			}
			snap := NewSnapshot()
			for path := range p.Accepted {
				_, _ = snap.ReadFile(path)
			}
			for _, c := range s.changes(st, p, snap) {
				if c.Inside {
					out = append(out, c)
				}
			}
		}
		return nil
	})
	return out, err
}
