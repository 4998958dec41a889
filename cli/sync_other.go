//go:build !linux

package cli

import (
	"errors"
	"io/fs"
	"syscall"
)

// watchProject: inotify is Linux's; elsewhere the project is scanned.
func watchProject(*projectSync) (func(), error) {
	return nil, errors.New("this OS has no inotify")
}

// inodeOf is 0 here: the scan compares mode, size and mtime.
func inodeOf(fs.FileInfo) uint64 { return 0 }

// isNotDir reports whether err is ENOTDIR.
func isNotDir(err error) bool { return errors.Is(err, syscall.ENOTDIR) }
