package trust

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/paths"
)

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
// inside the sandbox. On Linux the clock itself is read first (a run's end is
// recorded from before its layers were read: the clock has mostly passed it
// already), then a file written until its change time is after end. Bounded
// to 100 ms; a store with a test's clock skips it.
func (s *Store) settle(end time.Time) {
	if end.IsZero() || s.Now != nil || s.Ctime != nil || coarsePassed(end) {
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
