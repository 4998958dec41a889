package daemonfiles

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/paths"
)

// lockTaken reports whether another open file description holds a flock on
// path, by taking a shared lock without waiting on a descriptor of its own and
// letting it go at once (where /proc/locks cannot be read: macOS). A missing
// file, a link or anything that cannot be opened is not taken.
func lockTaken(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}

// LockHeld reports whether a daemon holds the singleton lock of p now (a
// daemon that died released it).
func LockHeld(p *paths.Paths) bool { return lockTaken(p.Lock()) }
