package supervisor

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/airlock-dev/airlock/internal/fsentry"
)

// The files API's operations that the Engine's archive API cannot do, run in
// the sandbox as the sandbox's user by `airlock supervise fs` (list, stat,
// rm, mkdir, mv, watch; watch is in fswatch_linux.go). Paths are absolute; a
// symbolic link is never followed below the path asked for.

// FsPathPrefix starts a path argument of `supervise fs` given as base64 of
// its bytes (one that is not UTF-8, which the Engine's exec API cannot carry):
// no absolute path starts so.
const FsPathPrefix = "base64:"

// FsPath is the path an argument of `supervise fs` names.
func FsPath(arg string) (string, error) {
	b64, ok := strings.CutPrefix(arg, FsPathPrefix)
	if !ok {
		return arg, nil
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", &FsError{Kind: fsentry.KindInvalid, Msg: fmt.Sprintf("cannot read the path %q: not base64 after %q", arg, FsPathPrefix)}
	}
	return string(b), nil
}

// FsError is a failed operation: Kind is one of fsentry's Kind constants.
type FsError struct {
	Kind string
	Msg  string
}

func (e *FsError) Error() string { return e.Msg }

// fsErr classifies err (of what on p) as an FsError.
func fsErr(what, p string, err error) error {
	kind := fsentry.KindOther
	var errno syscall.Errno
	// ENOTEMPTY is fs.ErrExist to errors.Is: the errno is asked first.
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOTDIR:
			kind = fsentry.KindNotDirectory
		case syscall.EISDIR:
			kind = fsentry.KindIsDirectory
		case syscall.ENOTEMPTY:
			kind = fsentry.KindNotEmpty
		case syscall.EINVAL:
			kind = fsentry.KindInvalid
		}
	}
	if kind == fsentry.KindOther {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			kind = fsentry.KindNotFound
		case errors.Is(err, fs.ErrExist):
			kind = fsentry.KindExists
		case errors.Is(err, fs.ErrPermission):
			kind = fsentry.KindPermission
		}
	}
	// The bare errno's text: the path is said once, quoted (a name may hold
	// a newline).
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return &FsError{Kind: kind, Msg: fmt.Sprintf("cannot %s %q: %v", what, p, err)}
}

// BecomeMainUser makes this process the sandbox's user, the main command's
// (main.user of the spec at specPath), as `supervise exec` does: a sandbox
// whose container runs as root for a daemon of another user still reads and
// writes as its own user. Nothing changes when the spec names no user.
func BecomeMainUser(specPath string) error {
	spec, err := LoadSpec(specPath)
	if err != nil {
		return err
	}
	acct, err := lookupAccount("the files operation", spec.Main.User)
	if err != nil {
		return err
	}
	if c := acct.credential(); c != nil {
		if err := switchUser(c); err != nil {
			return fmt.Errorf("cannot act as user %q: %w", spec.Main.User, err)
		}
	}
	return nil
}

// FsStat describes p (lstat: a link is described, not followed).
func FsStat(p string) (fsentry.Entry, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return fsentry.Entry{}, fsErr("stat", p, err)
	}
	return entryOf(p, fi), nil
}

// entryOf is the entry of p, whose lstat is fi.
func entryOf(p string, fi fs.FileInfo) fsentry.Entry {
	e := fsentry.Entry{Name: path.Base(p), Path: p, Size: fi.Size(), MTime: fi.ModTime(), Mode: uint32(fi.Mode().Perm())}
	m := fi.Mode()
	if m&fs.ModeSetuid != 0 {
		e.Mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		e.Mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		e.Mode |= 0o1000
	}
	switch {
	case m.IsDir():
		e.Type = fsentry.TypeDir
	case m&fs.ModeSymlink != 0:
		e.Type = fsentry.TypeSymlink
		e.Target, _ = os.Readlink(p)
	case m&fs.ModeNamedPipe != 0:
		e.Type = fsentry.TypeFIFO
	case m&fs.ModeSocket != 0:
		e.Type = fsentry.TypeSocket
	case m&fs.ModeCharDevice != 0:
		e.Type = fsentry.TypeCharDevice
	case m&fs.ModeDevice != 0:
		e.Type = fsentry.TypeBlockDevice
	default:
		e.Type = fsentry.TypeFile
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.UID, e.GID = st.Uid, st.Gid
	}
	return e
}

// FsListing is what FsList found.
type FsListing struct {
	Entries   []fsentry.Entry `json:"entries"`
	Truncated bool            `json:"truncated"` // there were more than the limit
}

// FsList lists the directory p (a link to one is followed, at p only): its
// entries, and with depth > 1 those of its subdirectories down to depth
// levels (never through a link), each directory's entries sorted by name and
// followed by those of the subdirectory they name, at most limit of them. A
// subdirectory that cannot be read is listed, not what it holds.
func FsList(p string, depth, limit int) (FsListing, error) {
	out := FsListing{Entries: []fsentry.Entry{}}
	fi, err := os.Stat(p)
	if err != nil {
		return out, fsErr("list", p, err)
	}
	if !fi.IsDir() {
		return out, &FsError{Kind: fsentry.KindNotDirectory, Msg: fmt.Sprintf("cannot list %q: it is not a directory", p)}
	}
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		f, err := os.Open(dir)
		if err != nil {
			return err
		}
		ents, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			return err
		}
		sortDirEntries(ents)
		for _, de := range ents {
			if len(out.Entries) >= limit {
				out.Truncated = true
				return nil
			}
			child := path.Join(dir, de.Name())
			fi, err := os.Lstat(child)
			if err != nil {
				continue // gone meanwhile
			}
			out.Entries = append(out.Entries, entryOf(child, fi))
			if fi.IsDir() && level < depth {
				_ = walk(child, level+1)
				if out.Truncated {
					return nil
				}
			}
		}
		return nil
	}
	if err := walk(p, 1); err != nil {
		return out, fsErr("list", p, err)
	}
	return out, nil
}

// sortDirEntries sorts by name, byte-wise.
func sortDirEntries(ents []fs.DirEntry) {
	for i := 1; i < len(ents); i++ {
		for j := i; j > 0 && ents[j].Name() < ents[j-1].Name(); j-- {
			ents[j], ents[j-1] = ents[j-1], ents[j]
		}
	}
}

// FsRemove removes p: a file, a link (not what it points to) or an empty
// directory; with recursive a directory and all it holds.
func FsRemove(p string, recursive bool) error {
	if p == "/" {
		return &FsError{Kind: fsentry.KindInvalid, Msg: "cannot remove /"}
	}
	if _, err := os.Lstat(p); err != nil {
		return fsErr("remove", p, err)
	}
	if recursive {
		if err := os.RemoveAll(p); err != nil {
			return fsErr("remove", p, err)
		}
		return nil
	}
	if err := os.Remove(p); err != nil {
		return fsErr("remove", p, err)
	}
	return nil
}

// Bounds of one batched remove (`supervise fs rm --stdin`, POST
// …/files/remove): how many paths, and their bytes with a NUL each.
const (
	MaxRemovePaths = 10000
	MaxRemoveInput = 4 << 20
)

// FsRemoveAll removes each of paths as FsRemove does, in order; with
// missingOK a path that is not there is no error (nor is one whose parent is
// not a directory any more). It stops at the first failure.
func FsRemoveAll(paths []string, recursive, missingOK bool) error {
	for _, p := range paths {
		if !strings.HasPrefix(p, "/") {
			return &FsError{Kind: fsentry.KindInvalid, Msg: fmt.Sprintf("cannot remove %q: not an absolute path", p)}
		}
		err := FsRemove(p, recursive)
		var fe *FsError
		if missingOK && errors.As(err, &fe) && (fe.Kind == fsentry.KindNotFound || fe.Kind == fsentry.KindNotDirectory) {
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// FsMkdir makes the directory p (mode 0755 less the umask); with parents the
// missing ones on the way too, and p already a directory is no error.
func FsMkdir(p string, parents bool) error {
	if parents {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fsErr("make directory", p, err)
		}
		return nil
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		return fsErr("make directory", p, err)
	}
	return nil
}

// FsRename renames from as to (rename(2): within one filesystem). Without
// overwrite an existing to is an error (KindExists); with it a file at to is
// replaced, as is an empty directory by a directory.
func FsRename(from, to string, overwrite bool) error {
	if from == "/" || to == "/" {
		return &FsError{Kind: fsentry.KindInvalid, Msg: "cannot rename / or over it"}
	}
	if _, err := os.Lstat(from); err != nil {
		return fsErr("rename", from, err)
	}
	var err error
	if overwrite {
		err = os.Rename(from, to)
	} else {
		err = renameNoReplace(from, to)
	}
	if err != nil {
		if errors.Is(err, syscall.EXDEV) {
			return &FsError{Kind: fsentry.KindInvalid, Msg: fmt.Sprintf("cannot rename %q to %q: they are on different filesystems (mounts) of the sandbox", from, to)}
		}
		if errors.Is(err, fs.ErrExist) && !overwrite {
			return &FsError{Kind: fsentry.KindExists, Msg: fmt.Sprintf("cannot rename %q to %q: %q exists (ask to overwrite it)", from, to, to)}
		}
		return fsErr("rename", from, err)
	}
	return nil
}
