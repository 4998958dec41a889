//go:build linux

package control

// lockAttempts: one; nothing but a daemon takes the lock on Linux
// (daemonfiles.HoldsLock reads /proc/locks instead).
const lockAttempts = 1
