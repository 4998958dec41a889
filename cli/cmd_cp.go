package cli

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
	"syscall"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/termsafe"
	"github.com/airlock-dev/airlock/projectfs"
)

func init() { addCommand(newCpCommand) }

func newCpCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "cp SANDBOX:PATH HOST_PATH | HOST_PATH SANDBOX:PATH",
		Short: "Copy a file or directory out of a sandbox, or into one",
		Long: "cp copies through the daemon's files API, the same for a local daemon, one on another machine (-H)\n" +
			"and Kubernetes. SANDBOX is a sandbox ID, or empty (:PATH) for this project's sandbox; a relative PATH\n" +
			"is below the project's path in the sandbox. Into a directory that exists, the source goes in it\n" +
			"under its own name; else it takes the destination's name. HOST_PATH - is a tar stream on stdout\n" +
			"(out of a sandbox) or read from stdin (into a directory of one). Out of a sandbox nothing is written\n" +
			"through a symbolic link, and names leaving the destination are refused. A host path holding a colon\n" +
			"before any slash is written ./name.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, dst := args[0], args[1]
			sid, sp, sIn := sandboxPathArg(src)
			did, dp, dIn := sandboxPathArg(dst)
			switch {
			case sIn && dIn:
				return withCode(ExitUsage, fmt.Errorf("copy between a sandbox and this host: %s and %s are both in sandboxes", src, dst))
			case !sIn && !dIn:
				return withCode(ExitUsage, fmt.Errorf("name the sandbox's side as SANDBOX:PATH (or :PATH for this project's): %s and %s are both on this host", src, dst))
			}
			ctx := context.Background()
			c, err := a.daemonClient(ctx)
			if err != nil {
				return err
			}
			if sIn {
				id, p, err := a.cpSandboxPath(ctx, c, sid, sp)
				if err != nil {
					return err
				}
				return a.copyOut(ctx, c, id, p, dst)
			}
			id, p, err := a.cpSandboxPath(ctx, c, did, dp)
			if err != nil {
				return err
			}
			return a.copyIn(ctx, c, src, id, p)
		},
	}
}

// sandboxPathArg splits SANDBOX:PATH; ok is false for a host path (no colon,
// or a slash before it).
func sandboxPathArg(arg string) (id, p string, ok bool) {
	i := strings.IndexByte(arg, ':')
	if i < 0 || strings.Contains(arg[:i], "/") {
		return "", "", false
	}
	return arg[:i], arg[i+1:], true
}

// cpSandboxPath resolves the sandbox (id, or the project's) and its path p
// (a relative one below its project's path).
func (a *app) cpSandboxPath(ctx context.Context, c *client.Client, id, p string) (string, string, error) {
	var ids []string
	if id != "" {
		ids = []string{id}
	}
	list, err := a.targets(ctx, c, ids, nil)
	if err != nil {
		return "", "", err
	}
	sb := list[0]
	if p == "" {
		p = "."
	}
	if !path.IsAbs(p) {
		if sb.Project == "" {
			return "", "", withCode(ExitUsage, fmt.Errorf("sandbox %s has no project: give an absolute path in it", sb.ID))
		}
		p = path.Join(sb.Project, p)
	}
	return sb.ID, path.Clean(p), nil
}

// copyOut copies p of sandbox id to the host path dst.
func (a *app) copyOut(ctx context.Context, c *client.Client, id, p, dst string) error {
	rc, err := c.ReadArchive(ctx, id, p)
	if err != nil {
		return apiFailure(err)
	}
	defer rc.Close()
	if dst == "-" {
		if _, err := io.Copy(a.stdout, rc); err != nil {
			return withCode(ExitAirlock, fmt.Errorf("cannot copy %s out of sandbox %s: %w", p, id, err))
		}
		return nil
	}
	dir, rename := dst, ""
	if st, err := os.Stat(dst); err != nil || !st.IsDir() {
		// Not a directory here: the source takes dst's name.
		dir, rename = filepath.Dir(dst), filepath.Base(dst)
	}
	if err := extractOut(rc, dir, rename, a.warnf); err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot copy %s out of sandbox %s into %s: %w", p, id, dst, err))
	}
	return nil
}

// warnf prints an airlock warning line.
func (a *app) warnf(format string, args ...any) {
	fmt.Fprintf(a.stderr, "airlock: warning: "+format+"\n", args...)
}

// extractOut extracts the tar stream r into dir, its first name replaced by
// rename when not empty. A name that leaves dir, an entry below a symbolic
// link, and what is not a file, directory or link are skipped with a warning.
func extractOut(r io.Reader, dir, rename string, warn func(string, ...any)) error {
	root, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." || path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			warn("skipped %s: a name outside the destination", termsafe.Line(h.Name))
			continue
		}
		if rename != "" {
			_, rest, _ := strings.Cut(name, "/")
			name = path.Join(rename, rest)
		}
		target := filepath.Join(root, filepath.FromSlash(name))
		if linked := linkOnTheWay(root, name); linked != "" {
			warn("skipped %s: %s is a symbolic link, never written through", termsafe.Line(name), linked)
			continue
		}
		mode := fs.FileMode(h.Mode) & 0o777
		switch h.Typeflag {
		case tar.TypeDir:
			if st, err := os.Lstat(target); err == nil && st.IsDir() {
				continue
			} else if err == nil {
				if err := os.Remove(target); err != nil {
					return err
				}
			}
			if err := os.Mkdir(target, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg, tar.TypeRegA:
			if err := replaceable(target); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			_ = os.Chtimes(target, h.ModTime, h.ModTime)
		case tar.TypeSymlink:
			if err := replaceable(target); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		default:
			warn("skipped %s: not a file, directory or symbolic link", termsafe.Line(name))
		}
	}
}

// linkOnTheWay is the first of name's parent directories below root that is
// a symbolic link ("" for none).
func linkOnTheWay(root, name string) string {
	p := root
	parts := strings.Split(name, "/")
	for _, part := range parts[:len(parts)-1] {
		p = filepath.Join(p, part)
		if st, err := os.Lstat(p); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			return p
		}
	}
	return ""
}

// replaceable removes what is at target unless it is a regular file (which
// is written over) or nothing; a directory there is refused.
func replaceable(target string) error {
	st, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case st.IsDir():
		return fmt.Errorf("%s is a directory here", target)
	case st.Mode().IsRegular():
		return nil
	}
	return os.Remove(target)
}

// copyIn copies the host path src (- for a tar stream on stdin) into p of
// sandbox id.
func (a *app) copyIn(ctx context.Context, c *client.Client, src, id, p string) error {
	if src == "-" {
		if err := c.WriteArchive(ctx, id, p, a.stdin); err != nil {
			return apiFailure(err)
		}
		return nil
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(abs); err != nil {
		return withCode(ExitFailure, fmt.Errorf("cannot copy %s: %w", src, err))
	}
	dir, name := path.Dir(p), path.Base(p)
	if st, err := c.StatFile(ctx, id, p); err == nil && st.Type == client.FileTypeDir {
		dir, name = p, filepath.Base(abs)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(projectfs.WriteTree(pw, abs, name, nil, 0, 0)) }()
	err = c.WriteArchive(ctx, id, dir, pr)
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return apiFailure(err)
	}
	return nil
}
