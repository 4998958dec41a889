package docker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"github.com/airlock-dev/airlock/projectfs"
)

// UserCacheDir is where airlock keeps the tool caches of a sandbox user that
// cannot write the host's: home/.cache/airlock/uid-<uid>/<cache>, the folder
// owned by that uid and gid.
func UserCacheDir(home string, uid int, cache string) string {
	return filepath.Join(home, ".cache", "airlock", "uid-"+strconv.Itoa(uid), cache)
}

// fitCaches gives a sandbox user that is not root a cache of its own for
// every tool cache of hp whose host source it cannot write (the host's caches
// are root's when root filled or created them): the bind's source becomes
// UserCacheDir, created when missing and owned by the user. A user that can
// write the host's cache (sandbox.user = "host", a GOCACHE given to it)
// shares it, as root always does. It returns a warning for each cache it
// could not give (the daemon is not root, so cannot chown). Linux only, as
// writableWarnings: there the container's uid and gid are the host's.
func (p *hostPlanner) fitCaches(hp *hostPlan, u sandboxUser) []string {
	if runtime.GOOS != "linux" || u.UID == 0 {
		return nil
	}
	var out []string
	for i, b := range hp.Binds {
		if b.Cache == "" || b.ReadOnly {
			continue
		}
		why := notWritable(b.Source, u)
		if why == "" {
			continue
		}
		dir := UserCacheDir(p.expandHost("~", "/"), u.UID, b.Cache)
		if err := ownCacheDir(dir, u); err != nil {
			out = append(out, fmt.Sprintf("%s (target %s): the sandbox user (uid %d, gid %d) cannot write %s (%s), and cannot be given a cache of its own: %v; what it writes there fails (go cannot build): run the airlock daemon as root, or give the cache to that user (chown), or change sandbox.user",
				b.Name, projectfs.InHome(b.Target, u.Home), u.UID, u.GID, b.Source, why, err))
			continue
		}
		hp.Binds[i].Source = dir
	}
	return out
}

// ownCacheDir makes dir a folder (never a link) owned by u, creating it and
// its parents (owned by the daemon's user, mode 0755) when missing.
func ownCacheDir(dir string, u sandboxUser) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %w", filepath.Dir(dir), err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cannot create %s: %w", dir, err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("cannot use %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("cannot use %s: not a folder (%s)", dir, st.Mode().Type())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) == u.UID && int(sys.Gid) == u.GID {
		return nil
	}
	if err := os.Lchown(dir, u.UID, u.GID); err != nil {
		return fmt.Errorf("cannot give %s to uid %d: %w", dir, u.UID, err)
	}
	return nil
}
