package paths

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// WriteFileAtomic replaces path with data (mode perm, whatever the umask), so
// that a reader, and the file after a crash, has the old content or the new,
// never a part of either: see AtomicFile. The errors are the os package's,
// which name the file; callers say what the file is.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	return WriteAtomic(path, bytes.NewReader(data), perm)
}

// WriteAtomic is WriteFileAtomic with the content read from r.
func WriteAtomic(path string, r io.Reader, perm fs.FileMode) error {
	f, err := CreateAtomic(path, perm)
	if err != nil {
		return err
	}
	defer f.Cleanup()
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	return f.Commit()
}

// AtomicFile is the new content of a file, written to a temporary file in the
// same directory (named <base>.<random>.tmp, created with O_EXCL, so never a
// file or link someone else put there) and renamed over the file by Commit.
type AtomicFile struct {
	*os.File
	path string
	// NoSync leaves out the fsync of the file and of its directory: readers
	// still see the old or the new content, but a crash may leave the file
	// empty. For many files at once that are easily made again.
	NoSync    bool
	committed bool
}

// CreateAtomic starts the replacement of path: write to the AtomicFile, then
// Commit; defer Cleanup, which removes the temporary file unless Commit
// succeeded.
func CreateAtomic(path string, perm fs.FileMode) (*AtomicFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &AtomicFile{File: f, path: path}, nil
}

// Commit syncs the temporary file, closes it, renames it over the path and
// syncs the directory (a file system that cannot sync a directory is not an
// error).
func (f *AtomicFile) Commit() error {
	if f.committed {
		return errors.New("cannot commit " + f.path + " twice")
	}
	if !f.NoSync {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), f.path); err != nil {
		return err
	}
	f.committed = true
	if f.NoSync {
		return nil
	}
	d, err := os.Open(filepath.Dir(f.path))
	if err != nil {
		return nil // renamed; only durability is in doubt
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// Cleanup closes and removes the temporary file unless Commit succeeded.
func (f *AtomicFile) Cleanup() {
	if f.committed {
		return
	}
	f.Close()
	os.Remove(f.Name())
}
