package control

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/paths"
)

// ErrAlreadyRunning is returned when another daemon holds the lock.
var ErrAlreadyRunning = errors.New("another airlock daemon is running")

// lock is the daemon's singleton lock: an exclusive, non-blocking flock taken
// before the socket is touched. The kernel releases it when the process dies.
type lock struct{ f *os.File }

// acquireLock takes the lock in the runtime dir, which it first makes or checks
// (a real directory of the user's with mode 0700; design.md §2).
func acquireLock(p *paths.Paths) (*lock, error) {
	if err := p.EnsureRuntimeDir(); err != nil {
		return nil, err
	}
	path := p.Lock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot open the lock %s: %w", path, err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	for i := 1; i < lockAttempts && errors.Is(err, unix.EWOULDBLOCK); i++ {
		time.Sleep(10 * time.Millisecond) // a check of lockHeld may hold it an instant (lock_other.go)
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (lock %s is held)", ErrAlreadyRunning, path)
		}
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	return &lock{f: f}, nil
}

func (l *lock) release() {
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	l.f.Close()
}
