// Package trust remembers the manifest layers each project's sandboxes started
// from and tells which of them changed while a sandbox could write them.
//
// The record is one JSON file (state.json, 0600, in a 0700 folder of the user's
// data dir, never in a project or a sandbox) guarded by an flock (state.lock). It
// holds, per manifest: the accepted content of every layer file the last accepted
// load read (sandbox.toml, sandbox.local.toml, presets named by path, user
// presets, .airlockignore; a file that was absent is recorded as absent), when
// it was accepted, and the layers flagged as changed inside a sandbox; and, for
// the user, the sessions: each sandbox started by the CLI, with the host paths
// it could write (its bind-mounted project, its writable mounts), when it
// started and when it ended.
//
// A layer whose content differs from the accepted one was changed inside a
// sandbox when a session that could write it ran at its change time (its
// ctime, which code in a sandbox cannot set back; a removed file counts as
// changed inside whenever such a session ran since the acceptance), or when
// the CLI saw the difference itself as the sandbox's main command ended. Any
// other change was made while no sandbox ran and is accepted without a word.
package trust

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/paths"
)

// MaxStored is the largest layer content the record keeps for a diff; a larger
// file is recorded by its hash only.
const MaxStored = 1 << 20

// Lag opens every session's time window earlier than its start: a file's
// ctime comes from a coarse clock (a tick behind, or truncated to the second
// by some file systems), so a write right at the start may seem to precede
// it. The window needs no such margin at its end: a ctime is never later than
// the write.
const Lag = time.Second

// Retention is how long an ended session is kept for the projects it could
// write but which were not looked at since; MaxSessions bounds their number.
const (
	Retention   = 30 * 24 * time.Hour
	MaxSessions = 512
)

// File is the content of one layer file as read, or its absence.
type File struct {
	Absent bool   `json:"absent,omitempty"`
	Sum    string `json:"sha256,omitempty"`
	Size   int64  `json:"size,omitempty"`
	// Content is the file's bytes when Size <= MaxStored.
	Content []byte `json:"content,omitempty"`
}

// Same reports whether f and g are the same content (or both absent).
func (f File) Same(g File) bool { return f.Absent == g.Absent && f.Sum == g.Sum }

// Stored reports whether the content is kept (a diff can be shown).
func (f File) Stored() bool { return f.Absent || f.Size <= MaxStored }

func fileOf(data []byte) File {
	sum := sha256.Sum256(data)
	f := File{Sum: hex.EncodeToString(sum[:]), Size: int64(len(data))}
	if len(data) <= MaxStored {
		f.Content = append([]byte{}, data...)
	}
	return f
}

// Snapshot is what one load of a manifest read: every layer file by absolute
// path, absent ones included.
type Snapshot struct {
	Files map[string]File
	// Root, when set, is the project dir: a layer below it reached through a
	// symbolic link to a folder is refused (manifest.CheckLayerDirs).
	Root string
}

// NewSnapshot returns an empty snapshot.
func NewSnapshot() *Snapshot { return &Snapshot{Files: map[string]File{}} }

// ReadFile reads a layer file (manifest.Loader's ReadFile) and records what it
// read: its content, or its absence.
func (s *Snapshot) ReadFile(path string) ([]byte, error) {
	if s.Root != "" {
		if err := manifest.CheckLayerDirs(s.Root, clean(path)); err != nil {
			return nil, err
		}
	}
	data, err := manifest.ReadLayer(path)
	switch {
	case err == nil:
		s.Files[clean(path)] = fileOf(data)
	case errors.Is(err, fs.ErrNotExist):
		s.Files[clean(path)] = File{Absent: true}
	}
	return data, err
}

// Add records a file that is not a manifest layer but acts as one (.airlockignore).
func (s *Snapshot) Add(path string) error {
	_, err := s.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot read %s: %w", path, err)
	}
	return nil
}

// Paths lists the files of the snapshot, sorted.
func (s *Snapshot) Paths() []string {
	out := make([]string, 0, len(s.Files))
	for p := range s.Files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func clean(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}

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

type project struct {
	Dir        string          `json:"dir"`
	Accepted   map[string]File `json:"accepted"`
	AcceptedAt time.Time       `json:"accepted_at"`
	Flagged    map[string]Flag `json:"flagged,omitempty"`
}

type state struct {
	Version    int                 `json:"version"`
	NextSerial uint64              `json:"next_serial"`
	Projects   map[string]*project `json:"projects"`
	Sessions   []*Session          `json:"sessions"`
}

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

// Store is the record of one user.
type Store struct {
	Dir string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Ctime tells when a file last changed; nil means its ctime.
	Ctime func(path string) (time.Time, bool)
}

// New returns the store in dir (paths.Paths.Trust()).
func New(dir string) *Store { return &Store{Dir: dir} }

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) ctime(p string) (time.Time, bool) {
	if s.Ctime != nil {
		return s.Ctime(p)
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return time.Time{}, false
	}
	return time.Unix(int64(st.Ctim.Sec), int64(st.Ctim.Nsec)), true
}

// settle returns once the file system's clock has passed end, a session's end
// just recorded (zero: none). The kernel stamps files with a coarse clock, up
// to a tick (1-10 ms) behind time.Now: an edit made right after the command
// that ended the session returned (airlock stop && edit && airlock up) could
// otherwise carry a change time before the end and be taken for one made
// inside the sandbox. Bounded to 100 ms; a store with a test's clock skips it.
func (s *Store) settle(end time.Time) {
	if end.IsZero() || s.Now != nil || s.Ctime != nil {
		return
	}
	f, err := os.CreateTemp(s.Dir, ".clock-*")
	if err != nil {
		return
	}
	defer os.Remove(f.Name())
	defer f.Close()
	deadline := time.Now().Add(100 * time.Millisecond)
	for {
		var st unix.Stat_t
		if _, err := f.Write([]byte{0}); err != nil || unix.Fstat(int(f.Fd()), &st) != nil {
			return
		}
		if time.Unix(int64(st.Ctim.Sec), int64(st.Ctim.Nsec)).After(end) || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *Store) file() string { return filepath.Join(s.Dir, "state.json") }

// update runs f on the record under its lock and saves it when f succeeds.
func (s *Store) update(f func(*state) error) error {
	return s.modify(func(st *state) (bool, error) { return true, f(st) })
}

// view runs f on the record under its lock, and saves nothing.
func (s *Store) view(f func(*state) error) error {
	return s.modify(func(st *state) (bool, error) { return false, f(st) })
}

// modify runs f on the record under its lock and saves it when f says so.
// The file is replaced atomically (rename), without an fsync: a record that
// does not decode after a crash is refused with a message, never reset
// silently.
func (s *Store) modify(f func(*state) (bool, error)) error {
	if err := paths.EnsurePrivateDir(s.Dir); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(s.Dir, "state.lock"), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("cannot open the trust record's lock: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("cannot lock the trust record: %w", err)
	}
	st, err := s.load()
	if err != nil {
		return err
	}
	save, err := f(st)
	if err != nil || !save {
		return err
	}
	s.prune(st)
	data, err := json.MarshalIndent(st, "", " ")
	if err != nil {
		return fmt.Errorf("cannot encode the trust record: %w", err)
	}
	if err := writeNoSync(s.file(), data); err != nil {
		return fmt.Errorf("cannot write the trust record: %w", err)
	}
	return nil
}

func (s *Store) load() (*state, error) {
	st := &state{Version: 1, Projects: map[string]*project{}}
	f, _, err := paths.OpenRegular(s.file(), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot open the trust record %s: %w", s.file(), err)
	}
	defer f.Close()
	if err := json.NewDecoder(f).Decode(st); err != nil {
		return nil, fmt.Errorf("cannot read the trust record %s: %w (remove it to start afresh: every project is then trusted as it is)", s.file(), err)
	}
	if st.Projects == nil {
		st.Projects = map[string]*project{}
	}
	return st, nil
}

// prune drops ended sessions past Retention (and the oldest past MaxSessions)
// and the projects whose manifest is gone.
func (s *Store) prune(st *state) {
	now := s.now()
	st.Sessions = slices.DeleteFunc(st.Sessions, func(ss *Session) bool {
		return !ss.Ended.IsZero() && now.Sub(ss.Ended) > Retention
	})
	if n := len(st.Sessions) - MaxSessions; n > 0 {
		st.Sessions = st.Sessions[n:]
	}
	for key := range st.Projects {
		if _, err := os.Lstat(key); errors.Is(err, fs.ErrNotExist) {
			delete(st.Projects, key)
		}
	}
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
	return s.update(func(st *state) error {
		for _, ss := range st.Sessions {
			if ss.Pool && ss.Manifest == manifest && ss.Ended.IsZero() {
				return nil
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
		return nil
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
// With closed, the session ends now (its sandbox is stopped); otherwise it
// stays open, for its other files, until a Resolver says its sandbox is gone
// (daemons may still run). It returns the flagged changes.
func (s *Store) Ended(serial uint64, snap *Snapshot, closed bool) ([]Change, error) {
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
		save := false
		if ss.Sealed.IsZero() {
			ss.Sealed = s.now()
			save = true
		}
		if closed && ss.Ended.IsZero() {
			ss.Ended = s.now()
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

// resolvePath resolves the symbolic links of p's directory (p itself may be
// absent).
func resolvePath(p string) string {
	p = clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	if d, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		return filepath.Join(d, filepath.Base(p))
	}
	return p
}

// covers reports whether p is one of roots or below one.
func covers(roots []string, p string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, string(filepath.Separator))+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// writeNoSync replaces p with data (0600) by a rename, without an fsync: the
// record is written on every up and run, and a reader sees the old content or
// the new one.
func writeNoSync(p string, data []byte) error {
	f, err := paths.CreateAtomic(p, 0o600)
	if err != nil {
		return err
	}
	defer f.Cleanup()
	f.NoSync = true
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Commit()
}
