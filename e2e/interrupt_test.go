package e2e

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCtrlCWhileTheManifestLoads: a Ctrl-C in the first moments of `run` and
// `up`, while the manifest is read, ends them with 130 and "interrupted during
// setup", as later in the setup; it never kills the CLI by the signal's default
// action. The manifest is a FIFO, so the test knows the CLI is reading it: its
// open for writing returns once the CLI opened it.
func TestCtrlCWhileTheManifestLoads(t *testing.T) {
	limit(t)
	const manifest = "[sandbox]\nimage = \"{{image}}\"\n"
	for _, args := range [][]string{{"run", "--", "true"}, {"up", "-d"}} {
		t.Run(args[0], func(t *testing.T) {
			e := newEnv(t, manifest)
			text, err := os.ReadFile(filepath.Join(e.Project, "sandbox.toml"))
			if err != nil {
				t.Fatal(err)
			}
			fifo := filepath.Join(e.Project, "sandbox.toml")
			if err := os.Remove(fifo); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mkfifo(fifo, 0o644); err != nil {
				t.Fatal(err)
			}
			p := e.Start(args...)
			opened := make(chan *os.File, 1)
			go func() {
				f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					t.Error(err)
				}
				opened <- f
			}()
			var w *os.File
			select {
			case w = <-opened:
			case <-p.Done:
				t.Fatalf("airlock %v ended before it read the manifest: %s", args, p.Stderr)
			case <-time.After(cmdTimeout):
				t.Fatalf("airlock %v never opened sandbox.toml", args)
			}
			if w == nil {
				t.FailNow()
			}
			p.Signal(t, syscall.SIGINT)
			_, _ = w.Write(text)
			w.Close()
			r := p.MustWait(t, cmdTimeout)
			if r.Code != 130 {
				t.Errorf("airlock %v interrupted while it read the manifest: %s; want exit 130", args, r)
			}
			contains(t, "stderr", r.Stderr, "interrupted during setup")
			e.assertClean()
		})
	}
}
