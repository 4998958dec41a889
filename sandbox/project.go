package sandbox

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/docker/docker/api/types/container"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/paths"
)

// IgnoreFile is the project's list of paths left out of a copied project, in
// .dockerignore syntax.
const IgnoreFile = ".airlockignore"

// projectMode is how the project dir reaches the Engine: "bind" or "copy"
// (sandbox.project; auto binds on a local Engine and copies on a remote one).
func (rt *Runtime) projectMode(r *manifest.Resolved) string {
	switch r.Sandbox.Project {
	case "bind", "copy":
		return r.Sandbox.Project
	}
	if rt.Remote {
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
	err = rt.Engine.CopyToContainer(ctx, containerID, "/", pr, container.CopyToContainerOptions{AllowOverwriteDirWithFile: true})
	pr.CloseWithError(err)
	if err != nil {
		return failed("cannot copy the project %s into the sandbox: %v", dir, err)
	}
	return nil
}

// CopyOut copies rel (a path relative to the project dir) from a sandbox's
// container, running or stopped, back into the project dir on the host, replacing
// what is there. Only directories and regular files are written; a symbolic link
// or an entry that would land outside rel is skipped with a warning, so the
// sandbox's contents cannot write anywhere else on the host.
func (rt *Runtime) CopyOut(ctx context.Context, containerID, projectDir, rel string) (warnings []string, err error) {
	src, err := OutputPath(projectDir, rel)
	if err != nil {
		return nil, err
	}
	rc, _, err := rt.Engine.CopyFromContainer(ctx, containerID, src)
	if err != nil {
		return nil, failed("cannot copy %s out of the sandbox: %v", rel, err)
	}
	defer rc.Close()
	return ExtractOutput(rc, projectDir, rel)
}

// OutputPath is the path in the sandbox of rel, a --output path relative to the
// project dir (a config error when it leaves the project dir).
func OutputPath(projectDir, rel string) (string, error) {
	clean := path.Clean(filepath.ToSlash(rel))
	if rel == "" || path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", configErr("--output %q: use a path inside the project dir", rel)
	}
	return path.Join(filepath.ToSlash(projectDir), clean), nil
}

// ExtractOutput writes a tar archive of rel, its entries named from rel's base name
// (as the Engine's archive API gives it), into the project dir on the host. Only
// directories and regular files are written; a symbolic link or an entry that
// would land outside rel is skipped with a warning.
func ExtractOutput(r io.Reader, projectDir, rel string) (warnings []string, err error) {
	src, err := OutputPath(projectDir, rel)
	if err != nil {
		return nil, err
	}
	clean := path.Clean(filepath.ToSlash(rel))
	hostRoot := filepath.Join(projectDir, filepath.FromSlash(clean))
	base := path.Base(src)
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return warnings, failed("cannot copy %s out of the sandbox: %v", rel, err)
		}
		name := path.Clean(h.Name)
		if name != base && !strings.HasPrefix(name, base+"/") {
			warnings = append(warnings, fmt.Sprintf("--output %s: skipped %q (outside the path)", rel, h.Name))
			continue
		}
		sub := strings.TrimPrefix(strings.TrimPrefix(name, base), "/")
		dst := filepath.Join(hostRoot, filepath.FromSlash(sub))
		if err := checkNoLinks(projectDir, dst); err != nil {
			warnings = append(warnings, fmt.Sprintf("--output %s: skipped %q: %v", rel, h.Name, err))
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return warnings, failed("cannot write %s: %v", dst, err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return warnings, failed("cannot write %s: %v", dst, err)
			}
			if err := writeRegular(dst, tr, fs.FileMode(h.Mode)&0o777); err != nil {
				return warnings, failed("cannot write %s: %v", dst, err)
			}
		default:
			warnings = append(warnings, fmt.Sprintf("--output %s: skipped %q (not a regular file or directory)", rel, h.Name))
		}
	}
	return warnings, nil
}

// checkNoLinks refuses a destination whose existing parents below root include a
// symbolic link (or that is one itself), so a copy cannot be redirected.
func checkNoLinks(root, dst string) error {
	rel, err := filepath.Rel(root, dst)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return errors.New("outside the project dir")
	}
	p := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if part == "." {
			continue
		}
		p = filepath.Join(p, part)
		st, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link", p)
		}
	}
	return nil
}

func writeRegular(dst string, r io.Reader, mode fs.FileMode) error {
	if mode == 0 {
		mode = 0o644
	}
	f, err := paths.CreateAtomic(dst, mode)
	if err != nil {
		return err
	}
	defer f.Cleanup()
	// An --output tree may be thousands of files, easily copied again: each
	// replaces its file atomically, without the cost of two fsyncs a file.
	f.NoSync = true
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	// A directory where the file goes is replaced by it.
	if st, err := os.Lstat(dst); err == nil && st.IsDir() {
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
	}
	return f.Commit()
}
