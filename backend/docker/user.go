package docker

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/supervisor"
)

// sandboxUser is the user the sandbox runs as, resolved as Docker does: the
// manifest's user, else the image's USER, else root.
type sandboxUser struct {
	Spec   string // what Docker gets as Config.User
	UID    int
	GID    int
	Groups []int // supplementary groups, the primary one included (known when the accounts were read)
	Home   string
	// Added is the account airlock adds to the sandbox for a numeric user
	// the image has no passwd entry for (nil otherwise, or when the
	// accounts were not read).
	Added *addedAccount
}

// accounts are the users of a sandbox's image and containers: the Engine, the
// owner key its helper containers carry, and where notices go.
type accounts struct {
	engine client.APIClient
	owner  ownerKey
	notice func(format string, args ...any)
}

// accounts are the users of the runtime's sandboxes.
func (rt *Runtime) accounts() *accounts {
	return &accounts{engine: rt.Engine, owner: ownerKey(rt.Owner), notice: rt.notice}
}

// resolve resolves spec ("name", "uid", "name:group", "uid:gid" or "") against
// the image's /etc/passwd and /etc/group, read from a container that is created and
// removed without being started. The files are read only when needed: for a name,
// or when the caller needs the numeric ids or the home directory.
func (a *accounts) resolve(ctx context.Context, imageRef, spec string, need bool) (sandboxUser, error) {
	u := sandboxUser{Spec: spec, Home: "/root"}
	name, group, _ := strings.Cut(spec, ":")
	uid, uidErr := strconv.Atoi(name)
	if spec == "" || name == "root" || (uidErr == nil && uid == 0 && group == "") {
		return u, nil
	}
	if uidErr == nil && !need && (group == "" || isNumber(group)) {
		u.UID, u.GID = uid, uid
		if group != "" {
			u.GID, _ = strconv.Atoi(group)
		}
		u.Groups = []int{u.GID}
		u.Home = "/"
		return u, nil
	}
	passwd, groups, err := a.ofImage(ctx, imageRef)
	if err != nil {
		return u, err
	}
	// The same resolution as PID 1's for a daemon's user (runc's rules).
	acct, err := supervisor.ResolveAccount(spec,
		supervisor.AccountFile{Name: "the image's /etc/passwd", Rows: passwd},
		supervisor.AccountFile{Name: "the image's /etc/group", Rows: groups})
	switch {
	case errors.Is(err, supervisor.ErrNoSuchUser):
		return u, configErr("sandbox.user: user %q is not in the image's /etc/passwd", name)
	case errors.Is(err, supervisor.ErrNoSuchGroup):
		return u, configErr("sandbox.user: group %q is not in the image's /etc/group", group)
	case err != nil:
		return u, configErr("sandbox.user: %v", err)
	}
	u.UID, u.GID, u.Home = int(acct.UID), int(acct.GID), acct.Home
	for _, g := range acct.Groups {
		u.Groups = append(u.Groups, int(g))
	}
	if uidErr == nil && u.UID != 0 {
		if add := accountToAdd(u.UID, u.GID, passwd, groups); add != nil {
			u.Added, u.Home = add, add.Home
		}
	}
	return u, nil
}

func isNumber(s string) bool { _, err := strconv.Atoi(s); return err == nil }

// ofImage reads /etc/passwd and /etc/group of an image; a missing file reads as empty.
func (a *accounts) ofImage(ctx context.Context, imageRef string) (passwd, group [][]string, err error) {
	c, err := a.engine.ContainerCreate(ctx, &container.Config{
		Image:      imageRef,
		Entrypoint: []string{"/nonexistent"},
		Labels:     a.owner.helperLabels(),
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		return nil, nil, failed("cannot read the accounts of image %s: %v", imageRef, err)
	}
	defer removeContainer(context.WithoutCancel(ctx), a.engine, c.ID, container.RemoveOptions{Force: true})
	passwd, group = containerAccounts(ctx, a.engine, c.ID)
	return passwd, group, nil
}

// containerAccounts reads /etc/passwd and /etc/group of a container, running
// or not; a missing file reads as empty.
func containerAccounts(ctx context.Context, eng client.APIClient, containerID string) (passwd, group [][]string) {
	read := func(p string) [][]string {
		rc, _, err := copyFrom(ctx, eng, containerID, p)
		if err != nil {
			return nil
		}
		defer rc.Close()
		tr := tar.NewReader(rc)
		if _, err := tr.Next(); err != nil {
			return nil
		}
		var rows [][]string
		sc := bufio.NewScanner(io.LimitReader(tr, 4<<20))
		for sc.Scan() {
			f := strings.Split(sc.Text(), ":")
			if len(f) >= 3 && !strings.HasPrefix(f[0], "#") {
				for len(f) < 7 {
					f = append(f, "")
				}
				rows = append(rows, f)
			}
		}
		return rows
	}
	return read("/etc/passwd"), read("/etc/group")
}
