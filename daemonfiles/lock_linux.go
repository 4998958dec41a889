//go:build linux

package daemonfiles

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/paths"
)

// HoldsLock reports whether process pid holds the daemon's singleton lock: the
// lock file is flocked (/proc/locks lists a lock on its inode) and pid is the
// process that took it or has the file open. No one but a daemon opens that
// file, and the kernel drops the lock with the last descriptor, so a process
// for which this holds is the daemon, whatever a stale pid file says.
func HoldsLock(p *paths.Paths, pid int) bool {
	if pid <= 0 {
		return false
	}
	st, err := os.Stat(p.Lock())
	if err != nil {
		return false
	}
	sys := st.Sys().(*syscall.Stat_t)
	holders, locked := flockHolders(uint64(sys.Dev), sys.Ino)
	if !locked {
		return false
	}
	if holders[pid] {
		return true
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false
	}
	for _, fd := range fds {
		fst, err := os.Stat(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && os.SameFile(st, fst) {
			return true
		}
	}
	return false
}

// lockHeld reports whether any process holds the singleton lock.
func lockHeld(p *paths.Paths) bool {
	st, err := os.Stat(p.Lock())
	if err != nil {
		return false
	}
	sys := st.Sys().(*syscall.Stat_t)
	_, locked := flockHolders(uint64(sys.Dev), sys.Ino)
	return locked
}

// flockHolders reads /proc/locks: whether a granted FLOCK lock is on the inode,
// and the pids shown for it (the pid that took it, which may since have handed
// the descriptor on) when the device matches too (some filesystems show another
// device number there than stat does; then only the inode is compared, and a
// holder is found by its open descriptors instead).
func flockHolders(dev, ino uint64) (map[int]bool, bool) {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	holders, locked := map[int]bool{}, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters have "->".
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" {
			continue
		}
		id := strings.Split(fields[5], ":") // major (hex), minor (hex), inode
		if len(id) != 3 {
			continue
		}
		if n, err := strconv.ParseUint(id[2], 10, 64); err != nil || n != ino {
			continue
		}
		locked = true
		major, err1 := strconv.ParseUint(id[0], 16, 32)
		minor, err2 := strconv.ParseUint(id[1], 16, 32)
		if err1 != nil || err2 != nil || unix.Mkdev(uint32(major), uint32(minor)) != dev {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil {
			holders[pid] = true
		}
	}
	return holders, locked
}
