package projectfs

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/manifest"
)

// The context of [sandbox.build] (design.md §7): what the Docker backend sends
// its builder, or a client a daemon on another machine. The image built from it
// is tagged by a hash of what goes into the build:
//
//	airlock-build/<project dir base name>:<16 hex digits>
//
// The hash covers every file of the context that .dockerignore keeps (its path, type,
// mode and content, or a symlink's target, in path order), the Dockerfile path and
// the build args.
//
// The .dockerignore subset understood (the common patterns of Docker's own rules):
//   - one pattern a line; blank lines and lines starting with # are ignored;
//   - patterns are relative to the context root (a leading / is dropped, the pattern
//     is cleaned like a path) and use / as separator;
//   - *, ? and [...] match within one path segment (Go's path.Match), ** matches any
//     number of segments (zero included);
//   - a pattern that matches a directory excludes everything below it;
//   - !pattern re-includes what it matches; the last matching line wins;
//   - the Dockerfile and .dockerignore itself are always sent (the builder needs
//     them), as the docker CLI does.
//
// Not supported: escaping a leading ! or #, and Docker's Windows path rules.

// BuildRepo is the repository of images built from [sandbox.build].
const BuildRepo = "airlock-build"

// buildHashVersion changes when what the hash covers changes.
const buildHashVersion = "airlock-build-v1"

// BuildTag is the tag of the image built from a [sandbox.build] context whose
// hash is sum, for the project in projectDir.
func BuildTag(projectDir, sum string) string {
	if len(sum) > 16 {
		sum = sum[:16]
	}
	return BuildRepo + "/" + repoName(filepath.Base(projectDir)) + ":" + sum
}

// BuildSource is a [sandbox.build] context read on this machine: what the
// Docker backend builds from, and what a client sends a daemon on another
// machine, which builds the image from it.
type BuildSource struct {
	bc *buildContext
	// Sum is the context's hash; Tag the image built from it.
	Sum, Tag string
	// Dir is the context's folder (absolute), Dockerfile the Dockerfile's
	// slash path in it, Args the build args.
	Dir, Dockerfile string
	Args            map[string]string
}

// ReadBuildContext reads r's [sandbox.build] context (a config error when it
// or its Dockerfile is missing).
func ReadBuildContext(r *manifest.Resolved) (*BuildSource, error) {
	bc, err := newBuildContext(r)
	if err != nil {
		return nil, err
	}
	sum, err := bc.hash()
	if err != nil {
		return nil, err
	}
	return &BuildSource{bc: bc, Sum: sum, Tag: BuildTag(r.ProjectDir, sum), Dir: bc.dir, Dockerfile: bc.dockerfile, Args: bc.args}, nil
}

// WriteTar writes the context as the builder takes it.
func (b *BuildSource) WriteTar(w io.Writer) error { return b.bc.writeTar(w) }

// buildContext is the set of files sent to the builder.
type buildContext struct {
	dir        string // absolute context dir
	dockerfile string // slash path relative to dir
	args       map[string]string
	entries    []contextEntry // in path order
}

type contextEntry struct {
	rel  string // slash path relative to the context dir
	info fs.FileInfo
	link string // a symlink's target
}

func newBuildContext(r *manifest.Resolved) (*buildContext, error) {
	b := r.Sandbox.Build
	dir := b.Context
	if dir == "" {
		dir = "."
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(r.ProjectDir, dir)
	}
	dir = filepath.Clean(dir)
	if st, err := os.Stat(dir); err != nil {
		return nil, configErr("sandbox.build.context: cannot use %s: %v", dir, errors.Unwrap(err))
	} else if !st.IsDir() {
		return nil, configErr("sandbox.build.context: %s is not a directory", dir)
	}
	df := b.Dockerfile
	if df == "" {
		df = "Dockerfile"
	}
	df = filepath.Clean(filepath.FromSlash(df))
	if !filepath.IsLocal(df) {
		return nil, configErr("sandbox.build.dockerfile: %q is not inside the build context %s", b.Dockerfile, dir)
	}
	if st, err := os.Stat(filepath.Join(dir, df)); err != nil {
		return nil, configErr("sandbox.build.dockerfile: cannot use %s: %v", filepath.Join(dir, df), errors.Unwrap(err))
	} else if !st.Mode().IsRegular() {
		return nil, configErr("sandbox.build.dockerfile: %s is not a file", filepath.Join(dir, df))
	}
	bc := &buildContext{dir: dir, dockerfile: filepath.ToSlash(df), args: b.Args}
	ig, err := readDockerignore(dir)
	if err != nil {
		return nil, err
	}
	if err := bc.collect(ig); err != nil {
		return nil, err
	}
	return bc, nil
}

// collect lists the context's files that .dockerignore keeps, in path order.
func (bc *buildContext) collect(ig *dockerignore) error {
	always := map[string]bool{bc.dockerfile: true, ".dockerignore": true}
	err := filepath.WalkDir(bc.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == bc.dir {
			return nil
		}
		rel, err := filepath.Rel(bc.dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if ig.excluded(rel) && !always[rel] {
			if d.IsDir() && !ig.except && !strings.HasPrefix(bc.dockerfile, rel+"/") {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := contextEntry{rel: rel, info: info}
		switch {
		case info.Mode().IsRegular(), info.IsDir():
		case info.Mode()&fs.ModeSymlink != 0:
			if e.link, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			return nil // sockets, devices and pipes are not sent
		}
		bc.entries = append(bc.entries, e)
		return nil
	})
	if err != nil {
		return failed("cannot read the build context %s: %v", bc.dir, err)
	}
	return nil
}

// hash is the hex sha256 over the context's entries, the Dockerfile path and the
// build args.
func (bc *buildContext) hash() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\ndockerfile %q\n", buildHashVersion, bc.dockerfile)
	for _, k := range slices.Sorted(maps.Keys(bc.args)) {
		fmt.Fprintf(h, "arg %q=%q\n", k, bc.args[k])
	}
	for _, e := range bc.entries {
		if err := bc.hashEntry(h, e); err != nil {
			return "", failed("cannot read the build context %s: %v", bc.dir, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (bc *buildContext) hashEntry(h hash.Hash, e contextEntry) error {
	mode := e.info.Mode()
	fmt.Fprintf(h, "%q %o %s", e.rel, uint32(mode.Perm()|mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)), mode.Type())
	switch {
	case mode&fs.ModeSymlink != 0:
		fmt.Fprintf(h, " -> %q\n", e.link)
	case mode.IsRegular():
		f, err := os.Open(filepath.Join(bc.dir, filepath.FromSlash(e.rel)))
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, " %d\n", e.info.Size())
		n, err := io.Copy(h, f)
		if err != nil {
			return err
		}
		if n != e.info.Size() {
			return fmt.Errorf("%s changed while it was read", e.rel)
		}
	default:
		fmt.Fprintln(h)
	}
	return nil
}

// writeTar writes the context as a tar stream, owned by root as the builder expects.
func (bc *buildContext) writeTar(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	tw := tar.NewWriter(bw)
	for _, e := range bc.entries {
		hdr, err := tar.FileInfoHeader(e.info, e.link)
		if err != nil {
			return err
		}
		hdr.Name = e.rel
		if e.info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !e.info.Mode().IsRegular() {
			continue
		}
		f, err := os.Open(filepath.Join(bc.dir, filepath.FromSlash(e.rel)))
		if err != nil {
			return err
		}
		// Exactly the size announced, even when the file changed since.
		n, err := io.Copy(tw, io.LimitReader(f, e.info.Size()))
		f.Close()
		if err != nil {
			return err
		}
		if n != e.info.Size() {
			return fmt.Errorf("cannot send %s: it changed while it was read", e.rel)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// repoName turns a directory name into a valid repository path component: lower
// case letters, digits and single dashes, "project" when nothing is left.
func repoName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	out := b.String()
	if len(out) > 64 {
		out = strings.TrimRight(out[:64], "-")
	}
	if out == "" {
		return "project"
	}
	return out
}
