//go:build !linux

package supervisor

import "os"

// renameNoReplace: the supervisor runs only on Linux; elsewhere lstat checks.
func renameNoReplace(from, to string) error {
	if _, err := os.Lstat(to); err == nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: os.ErrExist}
	}
	return os.Rename(from, to)
}
