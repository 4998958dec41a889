package docker

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/projectfs"
	"github.com/airlock-dev/airlock/supervisor"
)

// Files in and out of a sandbox for the daemon's files API (control's
// ReadArchive and WriteArchive): tar streams in the layout of the Engine's
// archive API, which the Kubernetes backend's `supervise tar` and `supervise
// untar` share.

// ReadArchive returns a tar stream of p (absolute) in a sandbox's container,
// running or stopped, as the Engine's archive API gives it: entries named from
// p's base name, a symbolic link at p archived as a link, not followed.
func (rt *Runtime) ReadArchive(ctx context.Context, containerID, p string) (io.ReadCloser, error) {
	rc, _, err := copyFrom(ctx, rt.Engine, containerID, p)
	if err != nil {
		return nil, archiveErr(ctx, rt.Engine, containerID, "read", p, err)
	}
	return rc, nil
}

// archiveErr is the error of an archive call on p that failed with err: a
// path the Engine did not find wraps ErrNoSuchPath, unless the container is
// what is gone (ErrNotFound).
func archiveErr(ctx context.Context, eng client.APIClient, containerID, verb, p string, err error) error {
	if cerrdefs.IsNotFound(err) {
		if _, ierr := eng.ContainerInspect(ctx, containerID); cerrdefs.IsNotFound(ierr) {
			return fmt.Errorf("cannot %s %s: %w: its container %s is gone", verb, p, backend.ErrNotFound, containerID)
		}
		return fmt.Errorf("cannot %s %s: %w", verb, p, backend.ErrNoSuchPath)
	}
	return failed("cannot %s %s in the sandbox: %v", verb, p, err)
}

// WriteArchive extracts a tar stream into dir (absolute) of a sandbox's
// container, every entry owned by the sandbox's user: the container's user
// (or the one LabelUser names, when the container runs as root for its daemons),
// resolved in its own /etc/passwd and /etc/group as runc does (not by the
// Engine's CopyUIDGID, which looks the name up on the Engine's host). Folders
// missing on the way to dir are made, mode 0755, the user's. The Engine
// extracts it (confined to the container's filesystem and its mounts; a
// directory is not replaced by a file, nor the other way round).
func (rt *Runtime) WriteArchive(ctx context.Context, containerID, dir string, r io.Reader) error {
	in, err := rt.Engine.ContainerInspect(ctx, containerID)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("cannot write into %s: %w: its container %s is gone", dir, backend.ErrNotFound, containerID)
		}
		return failed("cannot write into %s in the sandbox: %v", dir, err)
	}
	user := in.Config.User
	if v := in.Config.Labels[backend.LabelUser]; v != "" {
		user = v // a root PID 1 beside a sandbox user that is not root
	}
	uid, gid, err := containerUser(ctx, rt.Engine, containerID, user)
	if err != nil {
		return err
	}
	base, missing, err := existingDir(ctx, rt.Engine, containerID, dir)
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(projectfs.OwnArchive(pw, r, missing, uid, gid)) }()
	err = copyTo(ctx, rt.Engine, containerID, base, pr, container.CopyToContainerOptions{})
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return archiveErr(ctx, rt.Engine, containerID, "write into", dir, err)
		}
		if kerr := backend.KindOfExtractError(dir, err.Error()); kerr != nil {
			return kerr
		}
		return failed("cannot write into %s in the sandbox: %v", dir, err)
	}
	return nil
}

// containerUser is the uid and gid of a container's user spec (Config.User).
func containerUser(ctx context.Context, eng client.APIClient, containerID, spec string) (uid, gid int, err error) {
	name, _, _ := strings.Cut(spec, ":")
	if spec == "" || name == "root" || spec == "0" {
		return 0, 0, nil
	}
	passwd, group := containerAccounts(ctx, eng, containerID)
	a, err := supervisor.ResolveAccount(spec,
		supervisor.AccountFile{Name: "the sandbox's /etc/passwd", Rows: passwd},
		supervisor.AccountFile{Name: "the sandbox's /etc/group", Rows: group})
	if err != nil {
		return 0, 0, failed("cannot resolve the sandbox's user %q: %v", spec, err)
	}
	return int(a.UID), int(a.GID), nil
}

// existingDir is the deepest folder of dir's path that is in the container
// (base) and the parts below it that are not (missing). A part that is there
// and is neither a folder nor a symbolic link (which the Engine resolves in
// the container) is an error wrapping ErrNotDirectory.
func existingDir(ctx context.Context, eng client.APIClient, containerID, dir string) (base string, missing []string, err error) {
	base = path.Clean(dir)
	for base != "/" {
		st, err := statPath(ctx, eng, containerID, base)
		if err == nil {
			if !st.Mode.IsDir() && st.Mode&os.ModeSymlink == 0 {
				return "", nil, fmt.Errorf("cannot write into %s: %s is %w", dir, base, backend.ErrNotDirectory)
			}
			break
		}
		if !cerrdefs.IsNotFound(err) {
			return "", nil, failed("cannot write into %s in the sandbox: %v", dir, err)
		}
		missing = append([]string{path.Base(base)}, missing...)
		base = path.Dir(base)
	}
	return base, missing, nil
}
