package supervisor

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlock-dev/airlock/paths"
)

// Install copies the running executable to dest (mode 0755), creating dest's
// folder: a temporary file beside dest renamed over it, so a reader never sees
// a part of it. The Kubernetes backend's init container runs it from an image
// that holds only the airlock binary (no shell, no cp) to put the supervisor
// on the volume the sandbox container runs it from.
func Install(dest string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot install the supervisor: cannot find this executable: %w", err)
	}
	return installFrom(exe, dest)
}

func installFrom(src, dest string) error {
	if dest == "" {
		return fmt.Errorf("cannot install the supervisor: no destination")
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("cannot install the supervisor: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return fmt.Errorf("cannot install the supervisor at %s: %w", dest, err)
	}
	if err := paths.WriteAtomic(dest, in, 0o755); err != nil {
		return fmt.Errorf("cannot install the supervisor at %s: %w", dest, err)
	}
	return nil
}
