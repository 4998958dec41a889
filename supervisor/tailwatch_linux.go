package supervisor

import (
	"context"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// fileWatch wakes a follower of a file when the file's folder changes
// (inotify), so that a followed file costs nothing while nothing is written:
// a sandbox's status stream is followed for as long as it runs, and polling
// it every 10 ms made a few hundred idle sandboxes a load of their own.
type fileWatch struct {
	fd       int    // the inotify instance
	stop     [2]int // a pipe written when the follower's context ends
	stopOnce chan struct{}
}

// watchFile watches the folder of path, or returns nil when it cannot (no
// inotify, no folder yet): the follower then polls.
func watchFile(ctx context.Context, path string) *fileWatch {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	const mask = unix.IN_MODIFY | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE | unix.IN_DELETE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(path), mask); err != nil {
		unix.Close(fd)
		return nil
	}
	w := &fileWatch{fd: fd, stopOnce: make(chan struct{})}
	if err := unix.Pipe2(w.stop[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		unix.Close(fd)
		return nil
	}
	go func() {
		select {
		case <-ctx.Done():
			_, _ = unix.Write(w.stop[1], []byte{0})
		case <-w.stopOnce:
		}
	}()
	return w
}

// wait returns once the folder changed, the context ended, or max passed.
func (w *fileWatch) wait(max time.Duration) {
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}, {Fd: int32(w.stop[0]), Events: unix.POLLIN}}
	deadline := time.Now().Add(max)
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms <= 0 {
			return
		}
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return
		}
		// Drain the events: what changed is read from the file itself.
		buf := make([]byte, 4096)
		for {
			if n, err := unix.Read(w.fd, buf); n <= 0 || err != nil {
				break
			}
		}
		return
	}
}

func (w *fileWatch) close() {
	close(w.stopOnce)
	unix.Close(w.fd)
	unix.Close(w.stop[0])
	unix.Close(w.stop[1])
}
