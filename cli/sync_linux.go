//go:build linux

package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/inotifyev"
)

// syncMask is what a watched directory of the project reports.
const syncMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_MOVE_SELF | unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// inotifyWatch watches every directory of the project that is not left out.
type inotifyWatch struct {
	s   *projectSync
	fd  int
	mu  sync.Mutex
	wds map[int]string // watch → directory, a slash path relative to the project
}

// watchProject watches s.dir with inotify; stop ends it. An error (no
// inotify, its watches ran out) leaves nothing open: the caller scans.
func watchProject(s *projectSync) (stop func(), err error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	f := os.NewFile(uintptr(fd), "inotify") // non-blocking: Close ends a Read
	w := &inotifyWatch{s: s, fd: fd, wds: map[int]string{}}
	if err := w.addTree("."); err != nil {
		f.Close()
		return nil, err
	}
	done := make(chan struct{})
	go w.read(f, done)
	return func() {
		f.Close()
		<-done
	}, nil
}

// addTree watches the directory rel and those below it that are not left out.
func (w *inotifyWatch) addTree(rel string) error {
	root := filepath.Join(w.s.dir, filepath.FromSlash(rel))
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != root {
				return nil // gone meanwhile
			}
			if p == root && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		r, _ := filepath.Rel(w.s.dir, p)
		r = filepath.ToSlash(r)
		if r != "." && w.s.excluded(r) {
			return filepath.SkipDir
		}
		wd, err := unix.InotifyAddWatch(w.fd, p, syncMask)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				return filepath.SkipDir
			}
			if errors.Is(err, unix.ENOSPC) {
				return errors.New("the kernel takes no more inotify watches: fs.inotify.max_user_watches")
			}
			return fmt.Errorf("inotify: %s: %w", p, err)
		}
		w.mu.Lock()
		w.wds[wd] = r
		w.mu.Unlock()
		return nil
	})
}

// forget stops watching rel and the directories below it.
func (w *inotifyWatch) forget(rel string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wd, r := range w.wds {
		if r == rel || strings.HasPrefix(r, rel+"/") {
			_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
			delete(w.wds, wd)
		}
	}
}

// read marks the paths of each event until f is closed.
func (w *inotifyWatch) read(f *os.File, done chan struct{}) {
	defer close(done)
	buf := make([]byte, 256<<10)
	for {
		n, err := f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.s.startPolling(fmt.Sprintf("inotify: %v", err))
			}
			return
		}
		if failed := w.handle(buf[:n]); failed != "" {
			f.Close()
			w.s.startPolling(failed)
			return
		}
	}
}

// handle marks what the events of one read name; a reason to scan instead
// when the watches cannot go on.
func (w *inotifyWatch) handle(b []byte) string {
	for _, ev := range inotifyev.Parse(b) {
		name, mask := ev.Name, ev.Mask
		if mask&unix.IN_Q_OVERFLOW != 0 {
			// Changes were lost: the whole project is sent again.
			w.s.mark(".")
			continue
		}
		w.mu.Lock()
		dir, ok := w.wds[ev.Wd]
		w.mu.Unlock()
		if !ok {
			continue
		}
		isDir := mask&unix.IN_ISDIR != 0
		rel := dir
		if name != "" {
			rel = path.Join(dir, name)
		}
		switch {
		case mask&unix.IN_IGNORED != 0:
			w.mu.Lock()
			delete(w.wds, ev.Wd)
			w.mu.Unlock()
		case mask&unix.IN_MOVE_SELF != 0:
			if dir != "." {
				// Moved within the project it is watched again at its
				// new path (IN_MOVED_TO); moved out, not at all.
				w.forget(dir)
			}
		case name == "":
			// The directory's own attributes: its entries say what changed.
		case w.s.excluded(rel):
		case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
			w.s.mark(rel)
			if isDir {
				if err := w.addTree(rel); err != nil {
					return err.Error()
				}
			}
		case mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
			w.s.mark(rel)
			if isDir {
				w.forget(rel)
			}
		case isDir:
			// A subdirectory's attributes: nothing in it changed.
		default:
			w.s.mark(rel)
		}
	}
	return ""
}

// inodeOf is info's inode number (0 when not known).
func inodeOf(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// isNotDir reports whether err is ENOTDIR: a path below what is no
// directory any more.
func isNotDir(err error) bool { return errors.Is(err, syscall.ENOTDIR) }
