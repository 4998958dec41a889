package trust

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestEditRightAfterTheEnd: with the real clock and the kernel's file times, a
// layer edited as soon as a session ended (airlock stop && edit && airlock up)
// is the user's edit, never one made inside the sandbox. The kernel stamps
// files with a coarse clock, up to a tick behind time.Now: an edit in the tick
// after the end looked older than the end (e2e.TestUpDetachExecRestartRecreateDown
// failed so: "sandbox.toml changed while sandbox … ran").
func TestEditRightAfterTheEnd(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	project := filepath.Join(root, "project")
	if err := os.Mkdir(project, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(project, "sandbox.toml")
	store := New(filepath.Join(root, "trust"))
	snap := func() *Snapshot {
		s := NewSnapshot()
		if _, err := s.ReadFile(manifest); err != nil {
			t.Fatal(err)
		}
		return s
	}
	for i := range 30 {
		if err := os.WriteFile(manifest, fmt.Appendf(nil, "[sandbox]\nimage = \"x%d\"\n", i), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := store.Accept(manifest, project, snap()); err != nil {
			t.Fatal(err)
		}
		ss, err := store.Begin(manifest, []string{project}, nil, 1, "", "")
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("s%d", i)
		if err := store.SetSandbox(ss.Serial, id); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			_, err = store.Ended(ss.Serial, snap(), true, time.Time{}) // run's end
		} else {
			_, err = store.Stopped(id) // stop, down
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(manifest, fmt.Appendf(nil, "[sandbox]\nimage = \"edited%d\"\n", i), 0o644); err != nil {
			t.Fatal(err)
		}
		changes, err := store.Check(manifest, project, snap(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range changes {
			if c.Inside {
				t.Fatalf("round %d: an edit made after sandbox %s ended was taken for one made inside it", i, c.Sandbox)
			}
		}
	}
}
