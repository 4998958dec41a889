//go:build !linux

package control

// Without /proc/locks (macOS) whether the lock is held is found by trying to
// take it (daemonfiles.LockHeld): a daemon starting in that instant would find
// it taken, so it tries again before it reports another daemon.
const lockAttempts = 5
