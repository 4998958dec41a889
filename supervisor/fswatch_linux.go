package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/fsentry"
	"github.com/airlock-dev/airlock/internal/inotifyev"
)

// dirMask is what a watched directory reports.
const dirMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// FsWatch reports the changes under o.Path through inotify (WatchOptions):
// first a ready event once the watches are set, then created, modified and
// removed events (a modified event right after a created or modified one for
// the same path is left out), and
// overflow events when a bound is reached. It returns nil when ctx ends or
// Path is removed (after its removed event), an error when Out fails.
func FsWatch(ctx context.Context, o WatchOptions) error {
	fi, err := os.Stat(o.Path)
	if err != nil {
		return fsErr("watch", o.Path, err)
	}
	if !fi.IsDir() {
		return &FsError{Kind: fsentry.KindNotDirectory, Msg: fmt.Sprintf("cannot watch %q: it is not a directory", o.Path)}
	}
	if o.MaxDirs <= 0 {
		o.MaxDirs = DefaultWatchMaxDirs
	}
	if o.Rate <= 0 {
		o.Rate = DefaultWatchRate
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 10 * time.Second
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fsErr("watch", o.Path, err)
	}
	f := os.NewFile(uintptr(fd), "inotify") // non-blocking: Close ends a Read
	defer f.Close()
	w := &watcher{o: o, fd: fd, dirs: map[int]string{}, out: bufio.NewWriter(o.Out), window: time.Now()}
	rootWD, err := unix.InotifyAddWatch(fd, o.Path, dirMask)
	if err != nil {
		return fsErr("watch", o.Path, err)
	}
	w.dirs[rootWD] = o.Path
	w.root = rootWD
	if o.Recursive {
		w.addTree(o.Path, false)
	}
	if err := w.emit(fsentry.Event{Type: fsentry.EventReady, Watched: len(w.dirs)}, true); err != nil {
		return err
	}
	if err := w.sayFull(); err != nil {
		return err
	}
	if err := w.flush(); err != nil {
		return err
	}

	reads := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				readErr <- err
				return
			}
			b := append([]byte(nil), buf[:n]...)
			select {
			case reads <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	idle := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			return fmt.Errorf("cannot read the watch of %q: %w", o.Path, err)
		case now := <-tick.C:
			if err := w.roll(now); err != nil {
				return err
			}
			if now.Sub(idle) >= o.Heartbeat {
				if _, err := w.out.WriteString("\n"); err != nil {
					return err
				}
				idle = now
			}
		case b := <-reads:
			done, err := w.handle(b)
			if err == nil {
				err = w.sayFull()
			}
			if err != nil {
				return err
			}
			idle = time.Now()
			if done {
				return w.flush()
			}
		}
		if err := w.flush(); err != nil {
			return err
		}
	}
}

// watcher is the state of FsWatch.
type watcher struct {
	o    WatchOptions
	fd   int
	root int
	dirs map[int]string // watch descriptor → directory
	full string         // why no more directories are watched (MaxDirs reached)
	said bool           // full was said, in an overflow event
	out  *bufio.Writer

	window  time.Time // start of the current second
	sent    int       // events written in it
	dropped int       // events left out in it

	// lastModified is the path of the last event written when it was a
	// created or modified: a modified event for it then says nothing new.
	lastModified string
}

// addTree watches the directories below dir (not dir itself), never through a
// link; with report, each entry found is a created event (a directory made
// or moved in: what it held before its watch was set).
func (w *watcher) addTree(dir string, report bool) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		if report {
			_ = w.emit(fsentry.Event{Type: fsentry.EventCreated, Path: p, Dir: d.IsDir()}, false)
		}
		if !d.IsDir() {
			return nil
		}
		if !w.add(p) {
			return filepath.SkipDir
		}
		return nil
	})
}

// add watches the directory p; false when it is not watched (MaxDirs reached,
// or it cannot be).
func (w *watcher) add(p string) bool {
	if len(w.dirs) >= w.o.MaxDirs {
		if w.full == "" {
			w.full = fmt.Sprintf("max_dirs: %d directories are watched, the most this watch takes; what changes in the others is not reported", w.o.MaxDirs)
		}
		return false
	}
	wd, err := unix.InotifyAddWatch(w.fd, p, dirMask)
	if err != nil {
		if errors.Is(err, unix.ENOSPC) && w.full == "" {
			w.full = fmt.Sprintf("max_user_watches: the sandbox's kernel takes no more watches (%d set); what changes in the others is not reported", len(w.dirs))
		}
		return false
	}
	w.dirs[wd] = p
	return true
}

// handle writes the events of one read of inotify; done once Path is gone.
func (w *watcher) handle(b []byte) (done bool, err error) {
	for _, ev := range inotifyev.Parse(b) {
		name, mask := ev.Name, ev.Mask
		if mask&unix.IN_Q_OVERFLOW != 0 {
			err = w.emit(fsentry.Event{Type: fsentry.EventOverflow, Reason: "queue: the kernel's queue of changes overflowed; some were lost"}, true)
			continue
		}
		dir, ok := w.dirs[ev.Wd]
		if !ok {
			continue
		}
		isDir := mask&unix.IN_ISDIR != 0
		switch {
		case mask&unix.IN_IGNORED != 0:
			delete(w.dirs, ev.Wd)
			if ev.Wd == w.root {
				return true, err
			}
		case mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
			if ev.Wd == w.root {
				err = w.emit(fsentry.Event{Type: fsentry.EventRemoved, Path: dir, Dir: true}, true)
				return true, err
			}
			if mask&unix.IN_MOVE_SELF != 0 {
				// Moved within the tree, it is watched again at its
				// new path (IN_MOVED_TO); moved out, not at all.
				_, _ = unix.InotifyRmWatch(w.fd, uint32(ev.Wd))
				delete(w.dirs, ev.Wd)
			}
		case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
			p := path.Join(dir, name)
			err = w.emit(fsentry.Event{Type: fsentry.EventCreated, Path: p, Dir: isDir}, false)
			if isDir && w.o.Recursive && w.add(p) {
				w.addTree(p, true)
			}
		case mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
			err = w.emit(fsentry.Event{Type: fsentry.EventRemoved, Path: path.Join(dir, name), Dir: isDir}, false)
		case mask&(unix.IN_MODIFY|unix.IN_ATTRIB) != 0:
			p := dir
			if name != "" {
				p = path.Join(dir, name)
			}
			err = w.emit(fsentry.Event{Type: fsentry.EventModified, Path: p, Dir: isDir}, false)
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

// emit writes ev, within the rate unless always (ready, overflow): past it,
// the event is counted for the overflow event roll writes.
func (w *watcher) emit(ev fsentry.Event, always bool) error {
	if ev.Type == fsentry.EventModified && ev.Path == w.lastModified {
		return nil
	}
	if !always {
		w.roll(time.Now())
		if w.sent >= w.o.Rate {
			w.dropped++
			return nil
		}
		w.sent++
	}
	w.lastModified = ""
	if ev.Type == fsentry.EventModified || ev.Type == fsentry.EventCreated {
		w.lastModified = ev.Path
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.out.Write(b)
	return err
}

// roll starts a new second once the current one is over, writing first the
// overflow event of what it left out.
func (w *watcher) roll(now time.Time) error {
	if now.Sub(w.window) < time.Second {
		return nil
	}
	dropped := w.dropped
	w.window, w.sent, w.dropped = now, 0, 0
	if dropped > 0 {
		w.lastModified = ""
		return w.emit(fsentry.Event{Type: fsentry.EventOverflow, Dropped: dropped, Reason: fmt.Sprintf(
			"rate: over %d events in a second; %d were left out", w.o.Rate, dropped)}, true)
	}
	return nil
}

func (w *watcher) flush() error { return w.out.Flush() }

// sayFull writes, once, the overflow event of a watch that reached its bound
// of directories.
func (w *watcher) sayFull() error {
	if w.full == "" || w.said {
		return nil
	}
	w.said = true
	return w.emit(fsentry.Event{Type: fsentry.EventOverflow, Reason: w.full}, true)
}
