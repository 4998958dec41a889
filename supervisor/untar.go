package supervisor

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Untar extracts a tar stream into a folder of a sandbox: `airlock supervise
// untar`, which the Kubernetes backend runs as an exec with the archive on stdin
// to copy the project and [copies] in, as the Docker backend does through the
// Engine's archive API (the archives are the same: see sandbox/copies.go).
//
// Directories, regular files and symbolic links are extracted with their
// modes and times; another kind of entry is skipped with a warning. A name is
// taken below the folder: an absolute one, or one with a ".." part, is refused.
// A symbolic link is never followed on the way to an entry (each folder is
// opened relative to its parent with O_NOFOLLOW): one where a folder is
// expected is refused, and one where the entry goes is replaced, as is a file
// (never written through, so neither a link nor a hard link redirects a
// write). A folder where a file or link goes is removed first; a folder over a
// folder is merged, and takes the entry's owner, mode and times unless the
// process may not change them (not run as root, nor its owner: /home when
// the sandbox user extracts into /), when it keeps its own.

// Owner is the owner --owner gives every extracted entry.
type Owner struct{ UID, GID int }

// ParseOwner reads "UID:GID" (numbers).
func ParseOwner(s string) (Owner, error) {
	u, g, ok := strings.Cut(s, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil || uid < 0 || gid < 0 {
		return Owner{}, fmt.Errorf("cannot use owner %q: want UID:GID, two numbers", s)
	}
	return Owner{UID: uid, GID: gid}, nil
}

// UntarOptions are the inputs of Untar.
type UntarOptions struct {
	// Dir is the folder the entries are named relative to; created (with
	// its parents, mode 0755, Owner's when given) when missing.
	Dir string
	In  io.Reader
	// Owner, when set, owns every entry; otherwise the archive's owners do
	// when the process runs as root (as tar and the Engine do), and the
	// entries are left to the process's user when it does not. Folders
	// created on the way to an entry the archive does not list are the
	// process's, mode 0755.
	Owner *Owner
	// Warn receives a line for each entry skipped; nil drops them.
	Warn func(string)
}

// Untar extracts o.In into o.Dir; errors name the entry.
func Untar(o UntarOptions) error {
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	if err := mkdirAllOwned(o.Dir, o.Owner); err != nil {
		return fmt.Errorf("cannot extract into %s: %w", o.Dir, err)
	}
	root, err := openDirAt(unix.AT_FDCWD, o.Dir)
	if err != nil {
		return fmt.Errorf("cannot extract into %s: %w", o.Dir, err)
	}
	defer unix.Close(root)
	x := &extractor{root: root, dir: o.Dir, owner: o.Owner, euid: os.Geteuid(), warn: o.Warn}
	tr := tar.NewReader(o.In)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("cannot extract into %s: cannot read the archive: %w", o.Dir, err)
		}
		if err := x.entry(h, tr); err != nil {
			return err
		}
	}
	return x.finishDirs()
}

// mkdirAllOwned is os.MkdirAll(dir, 0755) whose folders it creates are
// owner's when owner is set (the files API on a container that runs as root
// writes as the sandbox user: its folders on the way are that user's too).
func mkdirAllOwned(dir string, owner *Owner) error {
	if owner == nil {
		return os.MkdirAll(dir, 0o755)
	}
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s: %w", dir, unix.ENOTDIR)
		}
		return nil
	}
	if parent := path.Dir(dir); parent != dir {
		if err := mkdirAllOwned(parent, owner); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil
		}
		return err
	}
	return os.Lchown(dir, owner.UID, owner.GID)
}

// extractor is one Untar.
type extractor struct {
	root  int // the folder, open
	dir   string
	owner *Owner
	euid  int
	warn  func(string)
	// dirs get their mode and times once everything is extracted, so that
	// a read-only folder still takes its entries and keeps its mtime.
	dirs []dirMeta
}

type dirMeta struct {
	name  string // the entry's name, for errors
	parts []string
	mode  uint32
	atime unix.Timespec
	mtime unix.Timespec
}

// entryParts checks an entry's name and splits it into its parts below the
// folder; none means the folder itself.
func entryParts(name string) ([]string, error) {
	if name == "" {
		return nil, errors.New("the entry has no name")
	}
	if strings.HasPrefix(name, "/") {
		return nil, errors.New("an absolute path")
	}
	var parts []string
	for _, p := range strings.Split(name, "/") {
		switch p {
		case "", ".":
		case "..":
			return nil, errors.New("a path with .. would leave the folder")
		default:
			parts = append(parts, p)
		}
	}
	return parts, nil
}

func (x *extractor) fail(h *tar.Header, format string, a ...any) error {
	return fmt.Errorf("cannot extract %q into %s: %s", h.Name, x.dir, fmt.Sprintf(format, a...))
}

func (x *extractor) entry(h *tar.Header, r io.Reader) error {
	switch h.Typeflag {
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink:
	case tar.TypeXGlobalHeader:
		return nil
	default:
		x.warn(fmt.Sprintf("skipped %q: %s entries are not extracted", h.Name, TarEntryKind(h.Typeflag)))
		return nil
	}
	parts, err := entryParts(h.Name)
	if err != nil {
		return x.fail(h, "%v", err)
	}
	if len(parts) == 0 {
		if h.Typeflag != tar.TypeDir {
			return x.fail(h, "it names the folder itself, and is not a folder")
		}
		var st unix.Stat_t
		if err := unix.Fstat(x.root, &st); err != nil {
			return x.fail(h, "%v", err)
		}
		if !x.mayChange(&st) {
			return nil
		}
		if err := x.chown(h, x.root, ".", unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return x.fail(h, "%v", err)
		}
		x.dirs = append(x.dirs, x.meta(h, nil))
		return nil
	}
	parent, err := x.walk(parts[:len(parts)-1], true)
	if err != nil {
		return x.fail(h, "%v", err)
	}
	defer unix.Close(parent)
	last := parts[len(parts)-1]
	var st unix.Stat_t
	exists := unix.Fstatat(parent, last, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
	isDir := exists && st.Mode&unix.S_IFMT == unix.S_IFDIR
	if exists && !(isDir && h.Typeflag == tar.TypeDir) {
		if err := removeAt(parent, last, isDir); err != nil {
			return x.fail(h, "cannot replace what is there: %v", err)
		}
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if isDir && !x.mayChange(&st) {
			return nil
		}
		if !isDir {
			if err := unix.Mkdirat(parent, last, 0o700); err != nil {
				return x.fail(h, "%v", err)
			}
		}
		if err := x.chown(h, parent, last, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return x.fail(h, "%v", err)
		}
		x.dirs = append(x.dirs, x.meta(h, parts))
	case tar.TypeReg:
		if err := x.writeFile(h, parent, last, r); err != nil {
			return x.fail(h, "%v", err)
		}
	case tar.TypeSymlink:
		if err := unix.Symlinkat(h.Linkname, parent, last); err != nil {
			return x.fail(h, "%v", err)
		}
		if err := x.chown(h, parent, last, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return x.fail(h, "%v", err)
		}
		if err := unix.UtimesNanoAt(parent, last, times(h), unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return x.fail(h, "cannot set its times: %v", err)
		}
	}
	return nil
}

// writeFile creates last in parent (it is not there: O_EXCL, O_NOFOLLOW) with
// the entry's content, owner, mode and times.
func (x *extractor) writeFile(h *tar.Header, parent int, last string, r io.Reader) error {
	fd, err := unix.Openat(parent, last, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), h.Name)
	defer f.Close()
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	// The owner first: chown clears the set-user-ID and set-group-ID bits.
	if err := x.chown(h, fd, "", 0); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, entryMode(h)); err != nil {
		return fmt.Errorf("cannot set its mode: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := unix.UtimesNanoAt(parent, last, times(h), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("cannot set its times: %w", err)
	}
	return nil
}

// chown gives fd (name "") or name in the folder fd the entry's owner, if it
// gets one (see UntarOptions.Owner).
func (x *extractor) chown(h *tar.Header, fd int, name string, flags int) error {
	uid, gid := h.Uid, h.Gid
	switch {
	case x.owner != nil:
		uid, gid = x.owner.UID, x.owner.GID
	case x.euid != 0:
		return nil
	}
	var err error
	if name == "" {
		err = unix.Fchown(fd, uid, gid)
	} else {
		err = unix.Fchownat(fd, name, uid, gid, flags)
	}
	if err != nil {
		return fmt.Errorf("cannot give it to %d:%d: %w", uid, gid, err)
	}
	return nil
}

// mayChange reports whether the process may give a folder that is there the
// owner, mode and times of its entry: as root, or as its owner.
func (x *extractor) mayChange(st *unix.Stat_t) bool { return x.euid == 0 || int(st.Uid) == x.euid }

func (x *extractor) meta(h *tar.Header, parts []string) dirMeta {
	ts := times(h)
	return dirMeta{name: h.Name, parts: parts, mode: entryMode(h), atime: ts[0], mtime: ts[1]}
}

// finishDirs sets the folders' modes and times, the deepest (the latest
// listed) first, so a folder made read-only still lets its children be set.
// A folder a later entry replaced is passed over.
func (x *extractor) finishDirs() error {
	for i := len(x.dirs) - 1; i >= 0; i-- {
		d := x.dirs[i]
		parents, last := d.parts, "."
		if n := len(d.parts); n > 0 {
			parents, last = d.parts[:n-1], d.parts[n-1]
		}
		parent, err := x.walk(parents, false)
		if errors.Is(err, errNotThere) {
			continue
		}
		if err != nil {
			return fmt.Errorf("cannot extract %q into %s: %w", d.name, x.dir, err)
		}
		var st unix.Stat_t
		err = unix.Fstatat(parent, last, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(parent)
			continue
		}
		// Not a link (just checked, and nothing else runs in a held
		// sandbox), so the calls that would follow one do not.
		err = unix.Fchmodat(parent, last, d.mode, 0)
		if err == nil {
			err = unix.UtimesNanoAt(parent, last, []unix.Timespec{d.atime, d.mtime}, unix.AT_SYMLINK_NOFOLLOW)
		}
		unix.Close(parent)
		if err != nil {
			return fmt.Errorf("cannot extract %q into %s: cannot set its mode and times: %w", d.name, x.dir, err)
		}
	}
	return nil
}

// errNotThere: walk without create met a part that is missing or no longer a
// folder.
var errNotThere = errors.New("not there")

// walk opens the folder parts names below the root, one part at a time, never
// following a symbolic link; with create, missing folders are made (mode
// 0755). The caller closes the descriptor.
func (x *extractor) walk(parts []string, create bool) (int, error) {
	cur, err := openDirAt(x.root, ".")
	if err != nil {
		return -1, err
	}
	for i, p := range parts {
		fd, err := openDirAt(cur, p)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(cur, p, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				fd, err = openDirAt(cur, p)
			}
		}
		if err != nil {
			var st unix.Stat_t
			kind := ""
			if unix.Fstatat(cur, p, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				switch st.Mode & unix.S_IFMT {
				case unix.S_IFLNK:
					kind = "a symbolic link, never followed"
				case unix.S_IFDIR:
				default:
					kind = "not a folder"
				}
			}
			unix.Close(cur)
			where := path.Join(parts[:i+1]...)
			switch {
			case !create && (kind != "" || errors.Is(err, unix.ENOENT)):
				return -1, errNotThere
			case kind != "":
				return -1, fmt.Errorf("%s is %s", where, kind)
			default:
				return -1, fmt.Errorf("cannot open %s: %w", where, err)
			}
		}
		unix.Close(cur)
		cur = fd
	}
	return cur, nil
}

// openDirAt opens the folder name in dirfd, not a link to one; one the
// process may not read is opened for lookups only (where the system can).
func openDirAt(dirfd int, name string) (int, error) {
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		switch {
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EACCES) && oSearch != 0 && flags&oSearch == 0:
			flags |= oSearch
		default:
			return fd, err
		}
	}
}

// removeAt removes name from the folder parent, a folder with everything in it
// (never following a link).
func removeAt(parent int, name string, isDir bool) error {
	if !isDir {
		return unix.Unlinkat(parent, name, 0)
	}
	fd, err := openDirAt(parent, name)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), name)
	names, err := d.Readdirnames(-1)
	if err == nil {
		for _, n := range names {
			var st unix.Stat_t
			if err = unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				break
			}
			if err = removeAt(fd, n, st.Mode&unix.S_IFMT == unix.S_IFDIR); err != nil {
				break
			}
		}
	}
	d.Close()
	if err != nil {
		return err
	}
	return unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
}

// entryMode is the permission bits of an entry, with set-user-ID, set-group-ID
// and sticky.
func entryMode(h *tar.Header) uint32 { return uint32(h.Mode & 0o7777) }

// times is an entry's access and modification times for utimensat; an
// archive without access times gets the modification time for both.
func times(h *tar.Header) []unix.Timespec {
	m, _ := unix.TimeToTimespec(h.ModTime)
	a := m
	if !h.AccessTime.IsZero() {
		a, _ = unix.TimeToTimespec(h.AccessTime)
	}
	return []unix.Timespec{a, m}
}

// TarEntryKind names the kind of a tar entry of type t, for messages.
func TarEntryKind(t byte) string {
	switch t {
	case tar.TypeDir:
		return "directory"
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "FIFO"
	default:
		return fmt.Sprintf("type %q", t)
	}
}
