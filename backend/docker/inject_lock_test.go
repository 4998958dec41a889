package docker

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/paths"
)

// newLockTest is a runtime with a private runtime dir, a supervisor volume
// name of its own, and where that volume's shared lock goes (removed after).
func newLockTest(t *testing.T) (rt *Runtime, name, shared string) {
	rt = &Runtime{Paths: &paths.Paths{RuntimeDir: filepath.Join(t.TempDir(), "rt")}}
	name = "airlock-supervisor-test-" + strings.ToLower(rand.Text()[:10])
	shared = filepath.Join(os.TempDir(), name+".lock")
	t.Cleanup(func() { os.Remove(shared) })
	return rt, name, shared
}

// The supervisor volume's host-wide lock in os.TempDir() is not trusted when
// another user may have put it there: a symbolic link is not followed (its
// target is not created), and a file of another user's is not used (they could
// hold it locked for ever); the user's private runtime dir takes its place.
func TestSupervisorLockInSharedRoot(t *testing.T) {
	rt, name, shared := newLockTest(t)

	// Nothing there: the shared lock is made, mode 0600.
	f, got, err := rt.supervisors().lock(name)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got != shared {
		t.Errorf("lock at %s, want the shared %s", got, shared)
	}
	if st, err := os.Lstat(shared); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Errorf("the shared lock: %v %v, want a regular file with mode 0600", st.Mode(), err)
	}
	os.Remove(shared)

	// A link planted there: not followed.
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.Symlink(victim, shared); err != nil {
		t.Fatal(err)
	}
	f, got, err = rt.supervisors().lock(name)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := os.Lstat(victim); !os.IsNotExist(err) {
		t.Errorf("the planted link's target was created (%v)", err)
	}
	if want := filepath.Join(rt.Paths.RuntimeDir, name+".lock"); got != want {
		t.Errorf("with a link in the shared root: lock at %s, want %s", got, want)
	}
	if st, err := os.Lstat(rt.Paths.RuntimeDir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the runtime dir: %v %v, want mode 0700", st.Mode(), err)
	}
	os.Remove(shared)

	// Another user's file: not used.
	if os.Getuid() == 0 {
		if err := os.WriteFile(shared, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(shared, 4243, 4243); err != nil {
			t.Fatal(err)
		}
		f, got, err = rt.supervisors().lock(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if got == shared {
			t.Errorf("another user's lock file %s was used", shared)
		}
	}
}

// The supervisor volume's fill lock is not left behind (one file a build in
// os.TempDir() otherwise), and removing it keeps fills one at a time: a filler
// that locked a file its predecessor removed locks the new one instead.
func TestSupervisorLockRemovedAfterFill(t *testing.T) {
	rt, name, shared := newLockTest(t)

	release, got, err := rt.supervisors().lockFill(name)
	if err != nil {
		t.Fatal(err)
	}
	if got != shared {
		t.Errorf("lock at %s, want the shared %s", got, shared)
	}
	if _, err := os.Lstat(shared); err != nil {
		t.Errorf("the lock while held: %v", err)
	}
	release()
	if _, err := os.Lstat(shared); !os.IsNotExist(err) {
		t.Errorf("the lock %s is left after the fill (%v)", shared, err)
	}

	// Many fillers at once: never two inside.
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				release, _, err := rt.supervisors().lockFill(name)
				if err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(100 * time.Microsecond)
				inside.Add(-1)
				release()
			}
		}()
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Errorf("%d fillers held the lock at once", m)
	}
	if _, err := os.Lstat(shared); !os.IsNotExist(err) {
		t.Errorf("the lock %s is left after the fills (%v)", shared, err)
	}
}
