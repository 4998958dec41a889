package docker

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"

	"github.com/docker/docker/api/types/image"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
)

// maxWritableScan bounds how many entries of a mounted folder are looked at for
// folders the sandbox user cannot write (a Go build cache has 256).
const maxWritableScan = 1024

// writableWarnings gives the sandbox user its own tool caches where it cannot
// write the host's (fitCaches, which hp then holds), and returns a warning for
// each of those it could not give and for each other writable bind mount (a
// [mounts.*] entry or a tool's, read_only = false) whose host source the
// sandbox user cannot write, or which holds folders it cannot write (a cache
// a root sandbox filled once): writes there fail. The sandbox user is
// resolved as Create resolves it (users); a root user writes anywhere. Linux only:
// there the container's uid and gid are the host's (Docker Desktop's file
// sharing maps owners, so its answer would be wrong). A user that cannot be
// resolved is left to Create to report.
func (p *hostPlanner) writableWarnings(ctx context.Context, users *accounts, r *manifest.Resolved, hp *hostPlan, imageRef string, img image.InspectResponse) []string {
	if runtime.GOOS != "linux" {
		return nil
	}
	var binds []bind
	for _, b := range hp.Binds {
		if !b.ReadOnly {
			binds = append(binds, b)
		}
	}
	if len(binds) == 0 {
		return nil
	}
	spec := r.Sandbox.User
	if spec == "" && img.Config != nil {
		spec = img.Config.User
	}
	u, err := users.resolve(ctx, imageRef, spec, hasHomeTarget(binds))
	if err != nil || u.UID == 0 {
		return nil
	}
	out := p.fitCaches(hp, u)
	for _, b := range binds {
		if b.Cache != "" {
			continue
		}
		if why := notWritable(b.Source, u); why != "" {
			out = append(out, fmt.Sprintf("%s (target %s): the sandbox user (uid %d, gid %d) cannot write %s: %s; what it writes there fails: give it to that user (chown) or change sandbox.user",
				b.Name, projectfs.InHome(b.Target, u.Home), u.UID, u.GID, b.Source, why))
		}
	}
	return out
}

// notWritable says why u cannot write src ("" when it can): src itself, or
// (for a folder) the folders right in it, of which at most maxWritableScan
// entries are looked at.
func notWritable(src string, u sandboxUser) string {
	st, err := os.Stat(src)
	if err != nil {
		return ""
	}
	if !canWrite(st, u) {
		return ownerMode(st)
	}
	if !st.IsDir() {
		return ""
	}
	f, err := os.Open(src)
	if err != nil {
		return ""
	}
	names, _ := f.Readdirnames(maxWritableScan)
	f.Close()
	slices.Sort(names)
	bad, first := 0, ""
	for _, n := range names {
		p := filepath.Join(src, n)
		lst, err := os.Lstat(p)
		if err != nil || !lst.IsDir() || canWrite(lst, u) {
			continue
		}
		if bad == 0 {
			first = fmt.Sprintf("%s (%s)", n, ownerMode(lst))
		}
		bad++
	}
	switch {
	case bad == 1:
		return "its folder " + first + " is not writable by it"
	case bad > 1:
		return fmt.Sprintf("%d of its folders, such as %s, are not writable by it", bad, first)
	}
	return ""
}

// canWrite reports whether u may write (and, for a folder, enter) the file st
// describes, by its owner, group and mode, as the kernel decides for a process
// with u's uid and groups (ACLs aside).
func canWrite(st fs.FileInfo, u sandboxUser) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	need := os.FileMode(2)
	if st.IsDir() {
		need |= 1
	}
	perm := st.Mode().Perm()
	groups := u.Groups
	if len(groups) == 0 {
		groups = []int{u.GID}
	}
	var bits os.FileMode
	switch {
	case int(sys.Uid) == u.UID:
		bits = perm >> 6
	case slices.Contains(groups, int(sys.Gid)) || int(sys.Gid) == u.GID:
		bits = perm >> 3
	default:
		bits = perm
	}
	return bits&need == need
}

func ownerMode(st fs.FileInfo) string {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("owned by %d:%d, mode %04o", sys.Uid, sys.Gid, st.Mode().Perm())
	}
	return fmt.Sprintf("mode %04o", st.Mode().Perm())
}
