package paths

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// UnsafeDirError is a directory airlock refuses to use: it exists but is not a
// directory of the current user's own with mode 0700 (another local user made
// it, it is a symbolic link, or others may write into it).
type UnsafeDirError struct {
	Dir     string
	Problem string // "belongs to uid 1001 (bob), not to you (uid 1000)", …
	Hint    string // what to do, when there is more to say than the default
}

func (e *UnsafeDirError) Error() string {
	hint := e.Hint
	if hint == "" {
		hint = "remove it (or have its owner remove it) and try again"
	}
	return fmt.Sprintf("refusing to use %s: it %s; airlock uses only a real directory of your own with mode 0700: %s",
		e.Dir, e.Problem, hint)
}

// EnsurePrivateDir makes dir (mode 0700) when it is missing and checks it as
// design.md §2 requires of airlock's runtime directory: it must be a directory, not
// a symbolic link, owned by the current user, with mode 0700. It is made with
// Mkdir, not MkdirAll, and examined with Lstat, so a directory or link that
// another user placed first (in /tmp, say) is never adopted: the result is an
// *UnsafeDirError naming the directory and its owner. The parent is made with
// MkdirAll (0700) when missing; it is the caller's root (XDG_RUNTIME_DIR, the
// data dir, os.TempDir()) and is not checked.
func EnsurePrivateDir(dir string) error {
	dir = filepath.Clean(dir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
				return fmt.Errorf("cannot create %s: %w", filepath.Dir(dir), err)
			}
			err = os.Mkdir(dir, 0o700)
		}
		if err == nil {
			return fixMode(dir)
		}
		if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cannot create %s: %w", dir, err)
		}
		return CheckPrivateDir(dir)
	}
	return fixMode(dir)
}

// fixMode sets 0700 on a directory just made (the umask may have taken bits
// away), then checks it like any other.
func fixMode(dir string) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("cannot set the mode of %s: %w", dir, err)
	}
	return CheckPrivateDir(dir)
}

// CheckPrivateDir checks an existing dir as EnsurePrivateDir does.
func CheckPrivateDir(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("cannot examine %s: %w", dir, err)
	}
	if st.Mode()&os.ModeSymlink != 0 {
		target, _ := os.Readlink(dir)
		return &UnsafeDirError{Dir: dir, Problem: fmt.Sprintf("is a symbolic link (to %s)%s", target, ownedBy(st))}
	}
	if !st.IsDir() {
		return &UnsafeDirError{Dir: dir, Problem: "is not a directory" + ownedBy(st)}
	}
	if uid, ok := ownerUID(st); ok && uid != os.Getuid() {
		return &UnsafeDirError{Dir: dir, Problem: fmt.Sprintf("belongs to %s, not to you (%s)", describeUID(uid), describeUID(os.Getuid()))}
	}
	if perm := st.Mode().Perm(); perm != 0o700 || st.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 {
		return &UnsafeDirError{Dir: dir, Problem: fmt.Sprintf("has mode %04o, not 0700", uint32(st.Mode().Perm())|specialBits(st.Mode()))}
	}
	return nil
}

// OpenSharedLock opens (creating it, mode 0600) a lock file in a directory that
// other local users may write to, such as os.TempDir(). It refuses to follow a
// symbolic link (O_NOFOLLOW) and to use anything but a regular file owned by
// root or the current user: another user's file could be held locked by them
// for ever. The file is opened read-only, which is all flock needs, and
// without blocking (a FIFO put there would hang a plain open).
func OpenSharedLock(path string) (*os.File, error) {
	f, st, err := OpenRegular(path, os.O_RDONLY|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, &UnsafeFileError{Path: path, Problem: "is a symbolic link"}
	case errors.Is(err, ErrNotRegular):
		return nil, &UnsafeFileError{Path: path, Problem: "is not a regular file" + ownedBy(st)}
	case err != nil:
		return nil, err
	}
	if uid, ok := ownerUID(st); ok && uid != 0 && uid != os.Getuid() {
		f.Close()
		return nil, &UnsafeFileError{Path: path, Problem: fmt.Sprintf("belongs to %s, neither to you (%s) nor to root", describeUID(uid), describeUID(os.Getuid()))}
	}
	return f, nil
}

// ErrNotRegular is OpenRegular's error for a file that is not a regular one.
var ErrNotRegular = errors.New("not a regular file")

// OpenRegular opens path with flag and perm, O_NOFOLLOW and O_NONBLOCK added
// (a symbolic link is refused with ELOOP, a FIFO does not hang the open), and
// returns it with its FileInfo. A file that is not a regular one is closed and
// refused with an error wrapping ErrNotRegular; its FileInfo is returned then
// too.
func OpenRegular(path string, flag int, perm os.FileMode) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, st, fmt.Errorf("cannot open %s: %w", path, ErrNotRegular)
	}
	return f, st, nil
}

// UnsafeFileError is a file airlock refuses to use (see OpenSharedLock).
type UnsafeFileError struct {
	Path    string
	Problem string
}

func (e *UnsafeFileError) Error() string {
	return fmt.Sprintf("refusing to use %s: it %s", e.Path, e.Problem)
}

func ownerUID(st os.FileInfo) (int, bool) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid), true
	}
	return 0, false
}

// ownedBy is " (owned by uid N (name))", or "" when the owner is the current user.
func ownedBy(st os.FileInfo) string {
	if uid, ok := ownerUID(st); ok && uid != os.Getuid() {
		return fmt.Sprintf(" owned by %s", describeUID(uid))
	}
	return ""
}

// describeUID is "uid 1001 (bob)", or "uid 1001" when the name is not known.
func describeUID(uid int) string {
	s := "uid " + strconv.Itoa(uid)
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		s += " (" + u.Username + ")"
	}
	return s
}

func specialBits(m os.FileMode) uint32 {
	var b uint32
	if m&os.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}
