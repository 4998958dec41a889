package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestManifestFIFORefusedAtOnce: a sandbox.toml that is a FIFO (which a
// sandbox could make in its project) never holds `run` or `up` in the
// manifest's load, where a Ctrl-C used to be the only way out: it is refused
// at once, exit 2, naming what it is, and nothing is made.
func TestManifestFIFORefusedAtOnce(t *testing.T) {
	limit(t)
	for _, args := range [][]string{{"run", "--", "true"}, {"up", "-d"}} {
		t.Run(args[0], func(t *testing.T) {
			e := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
			fifo := filepath.Join(e.Project, "sandbox.toml")
			if err := os.Remove(fifo); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mkfifo(fifo, 0o644); err != nil {
				t.Fatal(err)
			}
			r := e.Run(args...)
			if r.Code != 2 {
				t.Errorf("airlock %v with a FIFO for sandbox.toml: %s; want exit 2", args, r)
			}
			contains(t, "stderr", r.Stderr, "sandbox.toml is not a regular file (a FIFO)")
			e.assertClean()
		})
	}
}
