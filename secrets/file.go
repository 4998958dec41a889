package secrets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/paths"
)

// beforeRename, when set by a test, runs after the temporary file is written
// and before it replaces the vault.
var beforeRename func(tmp string)

// ensureDir makes the vault's folder with mode 0700, and takes group and
// other access away from it when it already exists.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cannot create the vault folder: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cannot create the vault folder: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, st.Mode().Perm()&0o700); err != nil {
			return fmt.Errorf("cannot restrict the vault folder to its owner: %w", err)
		}
	}
	return nil
}

// writeAtomic replaces path with data (mode 0600) with paths.CreateAtomic: a
// temporary file in the same folder (the <base>.*.tmp that removeStaleTemps
// sweeps), fsync, rename over path, fsync the folder. A crash at any point
// leaves either the old file or the new one, never a mix.
func writeAtomic(path string, data []byte) error {
	if err := ensureDir(filepath.Dir(path)); err != nil {
		return err
	}
	f, err := paths.CreateAtomic(path, 0o600)
	if err != nil {
		return fmt.Errorf("cannot write the vault: %w", err)
	}
	defer f.Cleanup()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("cannot write the vault: %w", err)
	}
	if beforeRename != nil {
		beforeRename(f.Name())
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("cannot write the vault: %w", err)
	}
	return nil
}

// removeStaleTemps deletes temporary files that a crashed writer left. It is
// called with the write lock held, so no live writer owns them.
func removeStaleTemps(path string) {
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), escapeGlob(filepath.Base(path))+".*.tmp"))
	for _, m := range matches {
		os.Remove(m)
	}
}

func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(s)
}

// lockFile takes an exclusive lock on path+".lock", so two airlock processes
// changing the vault at once do not lose each other's change.
func lockFile(path string) (unlock func(), err error) {
	if err := ensureDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot lock the vault: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot lock the vault: %w", err)
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// readFile returns the vault file's content, or nil when it does not exist.
func readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the vault %s: %w", path, err)
	}
	return data, nil
}
