package docker

import (
	"context"
	"io"

	"github.com/docker/docker/api/types/container"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
)

// ProjectCopied reports whether a sandbox made from r gets a copy of the project
// rather than a bind mount (then `run --output` copies results back): how the
// project dir reaches the Engine (sandbox.project; auto binds on a local
// Engine and copies on a remote one).
func (rt *Runtime) ProjectCopied(r *manifest.Resolved) bool {
	return projectfs.Mode(r, rt.Remote) == "copy"
}

// copyProject copies the project dir into a created container at its own host path,
// owned by the sandbox user, leaving out what .airlockignore names (.git is copied
// unless it is named there). The archive is streamed.
func (c copier) copyProject(ctx context.Context, containerID, dir string, u sandboxUser) error {
	p, err := projectfs.ReadProject(dir)
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(p.WriteArchive(pw, u.UID, u.GID)) }()
	err = copyTo(ctx, c.engine, containerID, "/", pr, container.CopyToContainerOptions{AllowOverwriteDirWithFile: true})
	pr.CloseWithError(err)
	if err != nil {
		return failed("cannot copy the project %s into the sandbox: %v", dir, err)
	}
	return nil
}

// CopyOut copies rel (an --output path, relative to the project dir) from a
// sandbox's container, running or stopped, back into the project dir on the
// host by the rules of out (projectfs.Output.Extract), so the sandbox's contents
// cannot write anywhere else, remove anything, or write without bound.
func (rt *Runtime) CopyOut(ctx context.Context, containerID string, out *projectfs.Output, rel string) (warnings []string, err error) {
	src, err := projectfs.OutputPath(out.ProjectDir, rel)
	if err != nil {
		return nil, err
	}
	rc, _, err := copyFrom(ctx, rt.Engine, containerID, src)
	if err != nil {
		return nil, failed("cannot copy %s out of the sandbox: %v", rel, err)
	}
	defer rc.Close()
	return out.Extract(rc, rel)
}
