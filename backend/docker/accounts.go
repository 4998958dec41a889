package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/supervisor"
)

// Who the primary container runs as, and the account of a numeric sandbox user.
//
// PID 1 runs as the sandbox user (sandbox.user, else the image's USER), the
// least privilege, unless a daemon (a one-shot step included) names another
// user while the sandbox user is not root: switching users takes root, so the
// container then runs as root, the supervisor gives the main command the
// sandbox user (main.user), daemons without a user get it too, and `supervise
// exec` (airlock exec, the shell of up) becomes that user before it runs the
// command. See docs/supervisor.md#users and docs/security.md.

// rootUser is the container's user when PID 1 must be root.
const rootUser = "0"

// beside returns the keys (daemons.<name>.user, sorted) of the daemons
// that run as another user than the sandbox user u (spec), which is not root:
// a user that is not the same uid and gid in the image's accounts (one the
// image does not have, which a copy may add, counts as another). None when u
// is root. The image's accounts are read only when a daemon's user is not
// spelled as the sandbox user's.
func (a *accounts) beside(ctx context.Context, imageRef string, r *manifest.Resolved, spec string, u sandboxUser) ([]string, error) {
	if u.UID == 0 {
		return nil, nil
	}
	var keys []string
	var passwd, groups [][]string
	read := false
	for _, name := range slices.Sorted(maps.Keys(r.Daemons)) {
		du := r.Daemons[name].User
		if du == "" || du == spec {
			continue
		}
		if !read {
			var err error
			if passwd, groups, err = a.ofImage(ctx, imageRef); err != nil {
				return nil, err
			}
			read = true
		}
		if !sameAccount(spec, du, passwd, groups) {
			keys = append(keys, manifest.KeyPath("daemons", name, "user"))
		}
	}
	return keys, nil
}

// sameAccount reports whether users a and b are the same uid and gid in the
// given accounts.
func sameAccount(a, b string, passwd, groups [][]string) bool {
	resolve := func(spec string) (*supervisor.Account, error) {
		return supervisor.ResolveAccount(spec,
			supervisor.AccountFile{Name: "the image's /etc/passwd", Rows: passwd},
			supervisor.AccountFile{Name: "the image's /etc/group", Rows: groups})
	}
	x, err := resolve(a)
	if err != nil {
		return false
	}
	y, err := resolve(b)
	return err == nil && x.UID == y.UID && x.GID == y.GID
}

// addedAccount is what airlock adds to a sandbox whose user is a uid the
// image has no passwd entry for (sandbox.user = "host", or "1000:1000" on an
// image without that user): a passwd entry, a group entry when the gid has
// none either, and a home folder the user owns, so HOME is writable and
// programs that look their user up (whoami, ssh, git) find it.
type addedAccount struct {
	Name     string // the passwd entry's name
	Group    string // the group entry's name; "" when the image has a group with the gid
	UID, GID int
	Home     string
}

// accountToAdd is the account to add for uid:gid (not root) to the given
// accounts, nil when the passwd rows have an entry for uid. Its name is
// airlock, else airlock-UID when the image has an airlock user; its group's
// name is the same, else NAME-GID; its home is /home/NAME.
func accountToAdd(uid, gid int, passwd, groups [][]string) *addedAccount {
	names := map[string]bool{}
	for _, e := range passwd {
		if len(e) >= 3 {
			if id, err := strconv.Atoi(e[2]); err == nil && id == uid {
				return nil
			}
			names[e[0]] = true
		}
	}
	a := &addedAccount{Name: "airlock", UID: uid, GID: gid}
	if names[a.Name] {
		a.Name = "airlock-" + strconv.Itoa(uid)
	}
	a.Home = "/home/" + a.Name
	groupNames := map[string]bool{}
	for _, g := range groups {
		if len(g) >= 3 {
			if id, err := strconv.Atoi(g[2]); err == nil && id == gid {
				return a
			}
			groupNames[g[0]] = true
		}
	}
	a.Group = a.Name
	if groupNames[a.Group] {
		a.Group = a.Name + "-" + strconv.Itoa(gid)
	}
	return a
}

// passwdLine and groupLine are the entries' lines.
func (a *addedAccount) passwdLine() string {
	return fmt.Sprintf("%s:x:%d:%d:airlock sandbox user:%s:/bin/sh\n", a.Name, a.UID, a.GID, a.Home)
}

func (a *addedAccount) groupLine() string { return fmt.Sprintf("%s:x:%d:\n", a.Group, a.GID) }

// numericUser reports whether a user spec is "uid" or "uid:gid".
func numericUser(spec string) bool {
	name, group, hasGroup := strings.Cut(spec, ":")
	return isNumber(name) && (!hasGroup || isNumber(group))
}

// provide adds, to a created container that is not started, the
// account of u (a numeric user, not root) when its /etc/passwd has no entry
// for the uid: the entries appended to /etc/passwd and /etc/group (made when
// missing; kept as they are when they are not regular files, with a notice)
// and the home folder, mode 0755, owned by the user, unless it is there. It
// returns the account added (nil for none).
func (a *accounts) provide(ctx context.Context, containerID string, u sandboxUser) (*addedAccount, error) {
	passwd, groups := containerAccounts(ctx, a.engine, containerID)
	add := accountToAdd(u.UID, u.GID, passwd, groups)
	if add == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	dir := func(name string, uid, gid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, Uid: uid, Gid: gid, ModTime: now})
	}
	missing := func(p string) (bool, error) {
		_, err := statPath(ctx, a.engine, containerID, p)
		if cerrdefs.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, failed("cannot add the sandbox user's account: %v", err)
		}
		return false, nil
	}
	etcMade := false
	appendTo := func(file, line string) error {
		data, h, err := a.readRaw(ctx, containerID, file)
		if err != nil {
			return err
		}
		if h == nil {
			if !etcMade {
				if m, err := missing("/etc"); err != nil {
					return err
				} else if m {
					if err := dir("etc/", 0, 0); err != nil {
						return err
					}
				}
				etcMade = true
			}
			h = &tar.Header{Mode: 0o644}
		} else if h.Typeflag != tar.TypeReg {
			a.notice("warning: sandbox.user %s: %s is not a regular file; not adding %q to it", u.Spec, file, strings.TrimSpace(line))
			return nil
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			data = append(data, '\n')
		}
		data = append(data, line...)
		return writeFile(tw, &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(file, "/"), Mode: h.Mode, Uid: h.Uid, Gid: h.Gid, ModTime: now}, data)
	}
	if err := appendTo("/etc/passwd", add.passwdLine()); err != nil {
		return nil, err
	}
	if add.Group != "" {
		if err := appendTo("/etc/group", add.groupLine()); err != nil {
			return nil, err
		}
	}
	if m, err := missing(add.Home); err != nil {
		return nil, err
	} else if m {
		if m, err := missing(path.Dir(add.Home)); err != nil {
			return nil, err
		} else if m {
			if err := dir(strings.TrimPrefix(path.Dir(add.Home), "/")+"/", 0, 0); err != nil {
				return nil, err
			}
		}
		if err := dir(strings.TrimPrefix(add.Home, "/")+"/", add.UID, add.GID); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, failed("cannot add the sandbox user's account: %v", err)
	}
	if err := copyTo(ctx, a.engine, containerID, "/", &buf, container.CopyToContainerOptions{}); err != nil {
		return nil, failed("cannot add the sandbox user's account: %v", err)
	}
	return add, nil
}

func writeFile(tw *tar.Writer, h *tar.Header, data []byte) error {
	h.Size = int64(len(data))
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// readRaw reads a file of a container as it is, with its tar header (nil when
// it is not there); a file of more than 4 MiB is an error.
func (a *accounts) readRaw(ctx context.Context, containerID, p string) ([]byte, *tar.Header, error) {
	rc, _, err := copyFrom(ctx, a.engine, containerID, p)
	if cerrdefs.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, failed("cannot read %s in the sandbox: %v", p, err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if errors.Is(err, io.EOF) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, failed("cannot read %s in the sandbox: %v", p, err)
	}
	const limit = 4 << 20
	data, err := io.ReadAll(io.LimitReader(tr, limit+1))
	if err != nil {
		return nil, nil, failed("cannot read %s in the sandbox: %v", p, err)
	}
	if len(data) > limit {
		return nil, nil, failed("cannot read %s in the sandbox: larger than %d bytes", p, limit)
	}
	return data, h, nil
}
