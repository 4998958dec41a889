package supervisor

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames from as to unless to exists (renameat2's
// RENAME_NOREPLACE; a filesystem without it is checked with lstat first).
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		if _, lerr := os.Lstat(to); lerr == nil {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: os.ErrExist}
		}
		return os.Rename(from, to)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}
