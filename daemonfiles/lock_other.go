//go:build !linux

package daemonfiles

import "github.com/airlock-dev/airlock/paths"

// Without /proc/locks (macOS) whether the lock is held is found by trying to
// take it, shared and without waiting, on a descriptor of our own, and letting
// it go at once. A daemon starting in that instant would find it taken: it
// tries again before it reports another daemon.

// HoldsLock reports whether process pid holds the daemon's singleton lock: the
// lock is held, and pid is a process of this user's running `airlock daemon
// run` (its command line, from the kernel). No one but a daemon takes the lock,
// and only one can hold it.
func HoldsLock(p *paths.Paths, pid int) bool {
	return pid > 0 && lockHeld(p) && daemonProcess(pid)
}

// lockHeld reports whether any process holds the singleton lock.
func lockHeld(p *paths.Paths) bool { return lockTaken(p.Lock()) }
