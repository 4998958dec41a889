//go:build linux

package supervisor

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fileWatch wakes a following Tail when the file it follows changes: inotify on
// the file's folder (the file appears, is written, truncated) and, once Tail has
// it open, on the file itself (writes that reach it after it was renamed or
// removed). An idle follower then sleeps instead of looking at the file every
// 10 ms (2-3 % of a core for each sandbox that was up, for as long as it was).
type fileWatch struct {
	fd       int
	f        *os.File // fd for reads through the runtime's poller, so that Close ends them
	c        chan struct{}
	fileDone bool
}

// watchFile starts watching path's folder; nil when inotify is not there (Tail
// polls then).
func watchFile(path string) *fileWatch {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	const mask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(path), mask); err != nil {
		unix.Close(fd)
		return nil
	}
	w := &fileWatch{fd: fd, f: os.NewFile(uintptr(fd), "inotify"), c: make(chan struct{}, 1)}
	go w.read()
	return w
}

func (w *fileWatch) read() {
	buf := make([]byte, 4096)
	for {
		if _, err := w.f.Read(buf); err != nil {
			return
		}
		select {
		case w.c <- struct{}{}:
		default:
		}
	}
}

// opened adds the file Tail has open at path (once).
func (w *fileWatch) opened(path string) {
	if w == nil || w.fileDone {
		return
	}
	w.fileDone = true
	_, _ = unix.InotifyAddWatch(w.fd, path, unix.IN_MODIFY|unix.IN_ATTRIB|unix.IN_CLOSE_WRITE)
}

// changed is a channel that receives after a change (nil, which never
// receives, without a watch).
func (w *fileWatch) changed() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.c
}

func (w *fileWatch) close() {
	if w != nil {
		w.f.Close()
	}
}
