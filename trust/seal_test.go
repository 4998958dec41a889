package trust

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/manifest"
)

// remove removes p now: its folder's change time is the clock.
func (w *world) remove(p string) {
	w.t.Helper()
	if err := os.Remove(p); err != nil {
		w.t.Fatal(err)
	}
	w.ctimes[filepath.Dir(p)] = w.clock
}

// beginRun is a run's session whose sandbox sees the existing layers read-only.
func (w *world) beginRun(id string) *Session {
	w.t.Helper()
	var protected []string
	for _, p := range []string{w.manifest, w.local} {
		if _, err := os.Stat(p); err == nil {
			protected = append(protected, p)
		}
	}
	ss, err := w.store.Begin(w.manifest, []string{w.project}, protected, 1, "", id)
	if err != nil {
		w.t.Fatal(err)
	}
	return ss
}

// TestSealedRun: the user's edits, creations and removals made after a run's
// main command ended are never the sandbox's, while its daemons still stop;
// a layer that was absent when it started and appears before its sandbox
// stopped is.
func TestSealedRun(t *testing.T) {
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	stillStopping := func(*Session) Status { return Status{Running: true} }

	t.Run("edit and removal after the main command ended", func(t *testing.T) {
		w := newWorld(t)
		w.write(w.local, "[env]\nB = \"2\"\n")
		w.check(nil)
		w.at(sec(10))
		ss := w.beginRun("r1")
		w.at(sec(20))
		if ch, err := w.store.Ended(ss.Serial, w.snap(), false, time.Time{}); err != nil || len(ch) != 0 {
			t.Fatalf("Ended: %v %+v", err, ch)
		}
		w.at(sec(23))
		w.write(w.local, "[env]\nB = \"5\"\n")
		w.write(w.manifest, "[sandbox]\nimage = \"other\"\nuser = \"root\"\n")
		if got := w.check(stillStopping); got != nil {
			t.Fatalf("edits after the run returned, daemons still stopping: %v", got)
		}
		w.at(sec(30))
		w.remove(w.local)
		if got := w.check(stillStopping); got != nil {
			t.Fatalf("a removal after the run returned: %v", got)
		}
	})

	t.Run("a layer created while the daemons stop", func(t *testing.T) {
		w := newWorld(t)
		w.check(nil)
		w.at(sec(10))
		ss := w.beginRun("r1")
		w.at(sec(20))
		if _, err := w.store.Ended(ss.Serial, w.snap(), false, time.Time{}); err != nil {
			t.Fatal(err)
		}
		w.at(sec(21))
		w.write(w.local, "[mounts.etc]\nsource = \"/etc\"\ntarget = \"/h\"\n")
		if got := strings.Join(w.check(stillStopping), ","); got != "sandbox.local.toml@r1" {
			t.Fatalf("created before the sandbox stopped: %q", got)
		}
	})

	t.Run("unsealed: a run whose CLI was killed", func(t *testing.T) {
		w := newWorld(t)
		w.check(nil)
		w.at(sec(10))
		w.beginRun("r1")
		w.at(sec(20))
		w.write(w.manifest, "[sandbox]\nimage = \"x\"\nprivileged = true\n")
		if got := strings.Join(w.check(stillStopping), ","); got != "sandbox.toml@r1" {
			t.Fatalf("no seal: %q", got)
		}
	})
}

// TestRemovalBeforeTheSession: a file removed before a session began (its
// folder unchanged since) is not that session's.
func TestRemovalBeforeTheSession(t *testing.T) {
	w := newWorld(t)
	w.write(w.local, "x = 1\n")
	w.check(nil)
	w.at(time.Minute)
	w.remove(w.local)
	w.at(2 * time.Minute)
	w.begin("s1", w.project)
	w.at(3 * time.Minute)
	if got := w.check(running); got != nil {
		t.Fatalf("removed before the session: %v", got)
	}
	// The same removal, with the folder changed while it runs: when it was
	// removed cannot be told, so it counts.
	w2 := newWorld(t)
	w2.write(w2.local, "x = 1\n")
	w2.check(nil)
	w2.at(time.Minute)
	w2.begin("s1", w2.project)
	w2.at(2 * time.Minute)
	w2.remove(w2.local)
	if got := strings.Join(w2.check(running), ","); got != "sandbox.local.toml@s1" {
		t.Fatalf("removed while it ran: %q", got)
	}
}

// TestFirstSeenUnderASession: a manifest never seen before that a session
// could have written while it ran is judged like a change from nothing; one
// written before any session, or outside every session's paths, is accepted.
func TestFirstSeenUnderASession(t *testing.T) {
	w := newWorld(t) // sandbox.toml written at 10:00
	other := t.TempDir()
	w.at(time.Minute)
	w.begin("s1", other)
	w.at(2 * time.Minute)
	if got := w.check(running); got != nil {
		t.Fatalf("a session that cannot write it: %v", got)
	}

	w = newWorld(t)
	web := filepath.Join(w.project, "web")
	if err := os.Mkdir(web, 0o755); err != nil {
		t.Fatal(err)
	}
	w.at(time.Minute)
	w.begin("s1", w.project)
	w.at(2 * time.Minute)
	planted := filepath.Join(web, "sandbox.toml")
	w.write(planted, "[mounts.h]\nsource = \"/etc\"\ntarget = \"/h\"\n")
	snap := NewSnapshot()
	if _, err := snap.ReadFile(planted); err != nil {
		t.Fatal(err)
	}
	changes, err := w.store.Check(planted, web, snap, running)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || !changes[0].Inside || changes[0].Sandbox != "s1" || changes[0].Old != nil {
		t.Fatalf("a planted manifest: %+v", changes)
	}
	// Refused again until accepted.
	if changes, _ := w.store.Check(planted, web, snap, running); len(changes) != 1 || !changes[0].Inside {
		t.Fatalf("the second check: %+v", changes)
	}
	if err := w.store.Accept(planted, web, snap); err != nil {
		t.Fatal(err)
	}
	if changes, _ := w.store.Check(planted, web, snap, running); changes != nil {
		t.Fatalf("after Accept: %+v", changes)
	}
}

// TestPoolSession: a warm pool's parked sandboxes are a session until the pool
// holds none; the files they see read-only are never theirs.
func TestPoolSession(t *testing.T) {
	w := newWorld(t)
	w.check(nil)
	w.at(time.Minute)
	if err := w.store.BeginPool(w.manifest, []string{w.project}, []string{w.manifest}); err != nil {
		t.Fatal(err)
	}
	if err := w.store.BeginPool(w.manifest, []string{w.project}, []string{w.manifest}); err != nil {
		t.Fatal(err)
	}
	w.at(2 * time.Minute)
	w.write(w.manifest, "[sandbox]\nimage = \"x\"\nuser = \"root\"\n")
	if got := w.check(running); got != nil {
		t.Fatalf("an edit of a file the pool sees read-only: %v", got)
	}
	w.write(w.local, "[mounts.h]\nsource = \"/etc\"\ntarget = \"/h\"\n")
	if got := w.check(running); len(got) != 1 || got[0] != "sandbox.local.toml@" {
		t.Fatalf("a layer created while the pool holds sandboxes: %v", got)
	}
	var pools int
	_ = w.store.view(func(st *state) error {
		for _, ss := range st.Sessions {
			if ss.Pool {
				pools++
			}
		}
		return nil
	})
	if pools != 1 {
		t.Errorf("pool sessions: %d, want 1", pools)
	}
}

// TestHostileLayers: a layer that is a link, a FIFO or a huge file is refused
// at once with its reason, and nothing is read through a link.
func TestHostileLayers(t *testing.T) {
	dir := t.TempDir()
	wide := filepath.Join(dir, "wide.toml")
	if err := os.WriteFile(wide, []byte("[mounts.etc]\nsource = \"/etc\"\ntarget = \"/h\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "sandbox.local.toml")
	if err := os.Symlink(wide, link); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.toml")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.toml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.toml")
	if err := os.WriteFile(huge, make([]byte, manifest.MaxLayerSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "presets")
	if err := os.Symlink(dir, sub); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{link, "is a symbolic link"},
		{zero, "is a symbolic link"},
		{fifo, "is not a regular file (a FIFO)"},
		{huge, "is larger than 4 MiB"},
		{filepath.Join(sub, "wide.toml"), "reached through a symbolic link to a folder"},
	} {
		s := NewSnapshot()
		s.Root = dir
		done := make(chan error, 1)
		go func() { _, err := s.ReadFile(c.path); done <- err }()
		select {
		case err := <-done:
			var le *manifest.LayerError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want %q", filepath.Base(c.path), err, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the read blocked", filepath.Base(c.path))
		}
		if len(s.Files) != 0 {
			t.Errorf("%s: recorded %v", filepath.Base(c.path), s.Paths())
		}
	}
}
