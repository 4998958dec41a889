package trust

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// world is a project and a store with a clock and file times the test sets.
type world struct {
	t        *testing.T
	store    *Store
	clock    time.Time
	ctimes   map[string]time.Time
	project  string
	manifest string
	local    string
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, clock: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC), ctimes: map[string]time.Time{}}
	root := t.TempDir()
	w.project = filepath.Join(root, "project")
	if err := os.Mkdir(w.project, 0o755); err != nil {
		t.Fatal(err)
	}
	w.manifest = filepath.Join(w.project, "sandbox.toml")
	w.local = filepath.Join(w.project, "sandbox.local.toml")
	w.store = &Store{Dir: filepath.Join(root, "data", "airlock", "trust"), Now: func() time.Time { return w.clock }}
	w.store.Ctime = func(p string) (time.Time, bool) {
		if _, err := os.Stat(p); err != nil {
			return time.Time{}, false
		}
		c, ok := w.ctimes[p]
		return c, ok
	}
	w.write(w.manifest, "[sandbox]\nimage = \"x\"\n")
	return w
}

func (w *world) at(d time.Duration) { w.clock = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC).Add(d) }

// write writes a file now (its ctime is the clock).
func (w *world) write(p, content string) {
	w.t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
	w.ctimes[p] = w.clock
}

func (w *world) snap() *Snapshot {
	s := NewSnapshot()
	for _, p := range []string{w.manifest, w.local} {
		if _, err := s.ReadFile(p); err != nil && !os.IsNotExist(err) {
			w.t.Fatal(err)
		}
	}
	return s
}

// check returns the names of the files found changed inside a sandbox.
func (w *world) check(resolve Resolver) []string {
	w.t.Helper()
	changes, err := w.store.Check(w.manifest, w.project, w.snap(), resolve)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, c := range changes {
		if c.Inside {
			out = append(out, filepath.Base(c.Path)+"@"+c.Sandbox)
		}
	}
	return out
}

func (w *world) begin(id string, roots ...string) *Session {
	w.t.Helper()
	ss, err := w.store.Begin(w.manifest, roots, nil, 1, "", "")
	if err != nil {
		w.t.Fatal(err)
	}
	if id != "" {
		if err := w.store.SetSandbox(ss.Serial, id); err != nil {
			w.t.Fatal(err)
		}
	}
	return ss
}

func running(*Session) Status { return Status{Running: true} }

func endedAt(t time.Time) Resolver { return func(*Session) Status { return Status{Ended: t} } }

func TestCheck(t *testing.T) {
	min := func(n int) time.Duration { return time.Duration(n) * time.Minute }

	t.Run("first sight and the user's own edits are accepted", func(t *testing.T) {
		w := newWorld(t)
		if got := w.check(nil); got != nil {
			t.Fatalf("first check: %v", got)
		}
		w.at(min(5))
		w.write(w.local, "[mounts.h]\nsource = \"~\"\ntarget = \"/h\"\n")
		if got := w.check(nil); got != nil {
			t.Fatalf("no sandbox ran: %v", got)
		}
		// A sandbox that ran and ended, then the user's edit.
		w.at(min(10))
		w.begin("s1", w.project)
		w.at(min(20))
		w.write(w.manifest, "[sandbox]\nimage = \"y\"\n")
		if got := w.check(endedAt(w.clock.Add(-min(5)))); got != nil {
			t.Fatalf("an edit after the sandbox ended: %v", got)
		}
	})

	t.Run("an edit while a sandbox runs is refused until accepted", func(t *testing.T) {
		w := newWorld(t)
		w.check(nil)
		w.at(min(1))
		w.begin("s1", w.project)
		w.at(min(2))
		w.write(w.local, "[sandbox]\nprivileged = true\n")
		if got := strings.Join(w.check(running), ","); got != "sandbox.local.toml@s1" {
			t.Fatalf("while it runs: %q", got)
		}
		// Still refused once the sandbox ended, and again: nothing was accepted.
		w.at(min(30))
		for range 2 {
			if got := strings.Join(w.check(endedAt(w.clock.Add(-min(20)))), ","); got != "sandbox.local.toml@s1" {
				t.Fatalf("after it ended: %q", got)
			}
		}
		// A later edit by the user does not launder it.
		w.write(w.local, "[sandbox]\nprivileged = true\n# reviewed?\n")
		if got := w.check(nil); len(got) != 1 {
			t.Fatalf("edited again: %v", got)
		}
		if err := w.store.Accept(w.manifest, w.project, w.snap()); err != nil {
			t.Fatal(err)
		}
		if got := w.check(nil); got != nil {
			t.Fatalf("after Accept: %v", got)
		}
	})

	t.Run("layers as accepted ask nothing about sessions, until many are open", func(t *testing.T) {
		w := newWorld(t)
		w.check(nil)
		asked := 0
		count := func(*Session) Status { asked++; return Status{Ended: w.clock} }
		for range maxOpenUnresolved {
			w.begin("s", w.project)
		}
		if w.check(count); asked != 0 {
			t.Fatalf("asked about %d sessions with nothing changed", asked)
		}
		w.begin("s", w.project)
		if w.check(count); asked != maxOpenUnresolved+1 {
			t.Fatalf("asked about %d sessions, want all %d", asked, maxOpenUnresolved+1)
		}
		if w.check(count); asked != maxOpenUnresolved+1 {
			t.Fatalf("asked again about ended sessions: %d", asked)
		}
	})

	t.Run("a change undone is no change", func(t *testing.T) {
		w := newWorld(t)
		w.check(nil)
		w.begin("s1", w.project)
		w.at(min(1))
		w.write(w.manifest, "[sandbox]\nimage = \"evil\"\n")
		if got := w.check(running); len(got) != 1 {
			t.Fatalf("changed: %v", got)
		}
		w.write(w.manifest, "[sandbox]\nimage = \"x\"\n")
		if got := w.check(running); got != nil {
			t.Fatalf("undone: %v", got)
		}
	})

	t.Run("a file removed while a sandbox ran", func(t *testing.T) {
		w := newWorld(t)
		w.write(w.local, "[sandbox]\nnetwork = \"none\"\n")
		w.check(nil)
		w.at(min(1))
		w.begin("s1", w.project)
		if err := os.Remove(w.local); err != nil {
			t.Fatal(err)
		}
		w.at(min(60))
		if got := strings.Join(w.check(endedAt(w.clock.Add(-min(30)))), ","); got != "sandbox.local.toml@s1" {
			t.Fatalf("removed: %q", got)
		}
	})

	t.Run("only sessions that can write the file count", func(t *testing.T) {
		w := newWorld(t)
		w.check(nil)
		w.begin("copied")                                     // a copied project, no writable mount
		w.begin("elsewhere", filepath.Join(t.TempDir(), "x")) // a mount elsewhere
		w.at(min(1))
		w.write(w.local, "[sandbox]\nprivileged = true\n")
		if got := w.check(running); got != nil {
			t.Fatalf("no session could write it: %v", got)
		}
		// Another project's sandbox with a writable mount above this one.
		w.at(min(2))
		w.begin("other", filepath.Dir(w.project))
		w.at(min(3))
		w.write(w.manifest, "[sandbox]\nimage = \"evil\"\n")
		if got := strings.Join(w.check(running), ","); got != "sandbox.toml@other" {
			t.Fatalf("a mount above the project: %q", got)
		}
	})

	t.Run("a session that ended before the acceptance does not count", func(t *testing.T) {
		w := newWorld(t)
		w.at(min(1)) // the manifest was written before it began
		w.begin("old", w.project)
		w.at(min(5))
		ended := endedAt(w.clock)
		w.at(min(10))
		w.check(ended) // first sight, after it ended
		w.at(min(20))
		w.write(w.local, "x = 1\n")
		if got := w.check(ended); got != nil {
			t.Fatalf("an edit after: %v", got)
		}
	})

	t.Run("Ended flags what the main command changed, whatever the file times", func(t *testing.T) {
		w := newWorld(t)
		w.check(nil)
		ss := w.begin("s1", w.project)
		w.at(min(1))
		w.write(w.local, "[sandbox]\nprivileged = true\n")
		w.ctimes[w.local] = w.clock.Add(min(60)) // as if the user touched it later
		changes, err := w.store.Ended(ss.Serial, w.snap(), true, time.Time{})
		if err != nil || len(changes) != 1 || !changes[0].Inside || changes[0].Sandbox != "s1" {
			t.Fatalf("Ended: %v %+v", err, changes)
		}
		w.at(min(90))
		if got := strings.Join(w.check(nil), ","); got != "sandbox.local.toml@s1" {
			t.Fatalf("next check: %q", got)
		}
	})

	t.Run("Stopped flags at once what changed while the sandbox ran", func(t *testing.T) {
		w := newWorld(t)
		w.check(nil)
		w.at(min(1))
		w.begin("s1", w.project)
		w.at(min(2))
		w.write(w.local, "[sandbox]\nnetwork = \"host\"\n")
		w.at(min(3))
		changes, err := w.store.Stopped("s1")
		if err != nil || len(changes) != 1 || changes[0].Sandbox != "s1" {
			t.Fatalf("Stopped: %v %+v", err, changes)
		}
		// The user edits it later: still the sandbox's.
		w.at(min(10))
		w.write(w.local, "[sandbox]\nnetwork = \"host\"\n# mine now\n")
		if got := strings.Join(w.check(nil), ","); got != "sandbox.local.toml@s1" {
			t.Fatalf("next check: %q", got)
		}
	})

	t.Run("a session dropped before its sandbox was made does not count", func(t *testing.T) {
		w := newWorld(t)
		w.check(nil)
		ss, err := w.store.Begin(w.manifest, []string{w.project}, nil, 1, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.store.Drop(ss.Serial); err != nil {
			t.Fatal(err)
		}
		w.at(min(1))
		w.write(w.local, "x = 1\n")
		if got := w.check(running); got != nil {
			t.Fatalf("a dropped session: %v", got)
		}
	})
}

// TestRecordIsPrivate: the record is 0600 in a 0700 folder, and keeps the
// accepted content for a diff.
func TestRecordIsPrivate(t *testing.T) {
	w := newWorld(t)
	w.check(nil)
	for p, want := range map[string]os.FileMode{w.store.Dir: 0o700, filepath.Join(w.store.Dir, "state.json"): 0o600, filepath.Join(w.store.Dir, "state.lock"): 0o600} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %o, want %o", p, st.Mode().Perm(), want)
		}
	}
	acc, err := w.store.Accepted(w.manifest)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(acc[w.manifest].Content); got != "[sandbox]\nimage = \"x\"\n" {
		t.Errorf("accepted content: %q", got)
	}
	if !acc[w.local].Absent {
		t.Errorf("the absent sandbox.local.toml is not recorded as absent: %+v", acc[w.local])
	}
}
