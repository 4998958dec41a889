package docker

import (
	"context"
	"io"
	"path"
	"path/filepath"

	"github.com/docker/docker/api/types/container"

	"github.com/airlock-dev/airlock/manifest"
)

// IgnoreFile is the project's list of paths left out of a copied project, in
// .dockerignore syntax.
const IgnoreFile = ".airlockignore"

// projectMode is how the project dir reaches the Engine: "bind" or "copy"
// (sandbox.project; auto binds on a local Engine and copies on a remote one).
func (rt *Runtime) projectMode(r *manifest.Resolved) string { return ProjectMode(r, rt.Remote) }

// ProjectMode is how the project dir reaches an Engine: "bind" or "copy"
// (project = "auto" copies it to an Engine that cannot see this host's files).
func ProjectMode(r *manifest.Resolved, remote bool) string {
	switch r.Sandbox.Project {
	case "bind", "copy":
		return r.Sandbox.Project
	}
	if remote {
		return "copy"
	}
	return "bind"
}

// ProjectCopied reports whether a sandbox made from r gets a copy of the project
// rather than a bind mount (then `run --output` copies results back).
func (rt *Runtime) ProjectCopied(r *manifest.Resolved) bool { return rt.projectMode(r) == "copy" }

// copyProject copies the project dir into a created container at its own host path,
// owned by the sandbox user, leaving out what .airlockignore names (.git is copied
// unless it is named there). The archive is streamed.
func (rt *Runtime) copyProject(ctx context.Context, containerID, dir string, u sandboxUser) error {
	ig, err := readIgnoreFile(dir, IgnoreFile)
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeProjectArchive(pw, dir, ig, u)) }()
	err = rt.copyTo(ctx, containerID, "/", pr, container.CopyToContainerOptions{AllowOverwriteDirWithFile: true})
	pr.CloseWithError(err)
	if err != nil {
		return failed("cannot copy the project %s into the sandbox: %v", dir, err)
	}
	return nil
}

// CopyOut copies rel (an --output path, relative to the project dir) from a
// sandbox's container, running or stopped, back into the project dir on the
// host by the rules of out (Output.Extract), so the sandbox's contents cannot
// write anywhere else, remove anything, or write without bound.
func (rt *Runtime) CopyOut(ctx context.Context, containerID string, out *Output, rel string) (warnings []string, err error) {
	src, err := OutputPath(out.ProjectDir, rel)
	if err != nil {
		return nil, err
	}
	rc, _, err := rt.copyFrom(ctx, containerID, src)
	if err != nil {
		return nil, failed("cannot copy %s out of the sandbox: %v", rel, err)
	}
	defer rc.Close()
	return out.Extract(rc, rel)
}

// OutputPath is the path in the sandbox of rel, a --output path relative to the
// project dir (a config error when it leaves the project dir).
func OutputPath(projectDir, rel string) (string, error) {
	clean, err := cleanOutput(rel)
	if err != nil {
		return "", configErr("%v", err)
	}
	return path.Join(filepath.ToSlash(projectDir), clean), nil
}
