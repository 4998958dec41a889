package docker

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/registryauth"
)

// [sandbox.build] (design.md §7) builds the sandbox image through the Engine API with
// the classic builder (Engine 20.10 offers no BuildKit over the API without a
// session). The image is tagged by a hash of what goes into the build:
//
//	airlock-build/<project dir base name>:<16 hex digits>
//
// The hash covers every file of the context that .dockerignore keeps (its path, type,
// mode and content, or a symlink's target, in path order), the Dockerfile path and
// the build args. While it is unchanged the tagged image is reused without a build.
// A built image is labelled dev.airlock.project=<project dir>.
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

// build builds [sandbox.build] through the Engine API and returns the image reference.
func (rt *Runtime) build(ctx context.Context, r *manifest.Resolved) (string, error) {
	return rt.ownWork().build(ctx, r)
}

func (w *imageWork) build(ctx context.Context, r *manifest.Resolved) (string, error) {
	rt := w.rt
	var src buildInput
	if w.o.BuildTar != "" {
		// A context a client on another machine sent (PUT /v1/build-contexts).
		src = buildInput{tag: BuildTag(r.ProjectDir, w.o.BuildSum), from: "the context sent by the client",
			dockerfile: uploadedDockerfile(r), args: r.Sandbox.Build.Args,
			tar: func(wr io.Writer) error {
				f, err := os.Open(w.o.BuildTar)
				if err != nil {
					return err
				}
				defer f.Close()
				_, err = io.Copy(wr, f)
				return err
			}}
	} else {
		bc, err := newBuildContext(r)
		if err != nil {
			return "", err
		}
		sum, err := bc.hash()
		if err != nil {
			return "", err
		}
		src = buildInput{tag: BuildTag(r.ProjectDir, sum), from: bc.dir, dockerfile: bc.dockerfile, args: bc.args, tar: bc.writeTar}
	}
	tag := src.tag
	if _, err := rt.Engine.ImageInspect(ctx, tag); err == nil {
		return tag, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", failed("cannot inspect image %s: %v", tag, err)
	}

	// As docker build: every stored credential goes with the build, for private FROM images.
	auths := w.o.BuildAuths
	if auths == nil {
		var err error
		if auths, err = registryauth.All(rt.Getenv); err != nil {
			return "", failed("cannot build the sandbox image: %v", err)
		}
	}
	w.notice("building image %s from %s", tag, src.from)
	pr, pw := io.Pipe()
	defer pr.Close() // unblocks the writer when the Engine stops reading early
	go func() { pw.CloseWithError(src.tar(pw)) }()
	args := make(map[string]*string, len(src.args))
	for k, v := range src.args {
		args[k] = &v
	}
	resp, err := rt.Engine.ImageBuild(ctx, pr, build.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  src.dockerfile,
		BuildArgs:   args,
		Labels:      rt.buildLabels(r.ProjectDir),
		AuthConfigs: auths,
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return "", failed("cannot build the sandbox image: %v", err)
	}
	defer resp.Body.Close()
	if err := w.buildOutput(resp.Body); err != nil {
		return "", failed("cannot build the sandbox image: %v", err)
	}
	if _, err := rt.Engine.ImageInspect(ctx, tag); err != nil {
		return "", failed("cannot build the sandbox image: %s is missing after the build: %v", tag, err)
	}
	return tag, nil
}

// buildInput is what a build sends the Engine.
type buildInput struct {
	tag, from  string
	dockerfile string // slash path in the context
	args       map[string]string
	tar        func(io.Writer) error
}

// BuildTag is the tag of the image built from a [sandbox.build] context whose
// hash is sum, for the project in projectDir.
func BuildTag(projectDir, sum string) string {
	if len(sum) > 16 {
		sum = sum[:16]
	}
	return BuildRepo + "/" + repoName(filepath.Base(projectDir)) + ":" + sum
}

// uploadedDockerfile is the Dockerfile's path in a context a client sent.
func uploadedDockerfile(r *manifest.Resolved) string {
	df := r.Sandbox.Build.Dockerfile
	if df == "" {
		df = "Dockerfile"
	}
	return path.Clean(filepath.ToSlash(df))
}

// BuildSource is a [sandbox.build] context read on this machine: what a client
// sends a daemon on another machine, which builds the image from it.
type BuildSource struct {
	bc *buildContext
	// Sum is the context's hash; Tag the image built from it.
	Sum, Tag string
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
	return &BuildSource{bc: bc, Sum: sum, Tag: BuildTag(r.ProjectDir, sum)}, nil
}

// WriteTar writes the context as the builder takes it.
func (b *BuildSource) WriteTar(w io.Writer) error { return b.bc.writeTar(w) }

// buildMessage is one JSON message of the classic builder's output stream.
type buildMessage struct {
	Stream      string        `json:"stream"`
	Status      string        `json:"status"`
	ID          string        `json:"id"`
	Progress    *jsonProgress `json:"progressDetail"`
	Error       string        `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// buildOutput reads the build stream to its end, copying its text to the progress
// writer as plain lines ("Step 1/3 : FROM …"), and returns the error it reports.
func (w *imageWork) buildOutput(r io.Reader) error {
	show := !w.o.Quiet && w.o.Progress != nil
	var partial strings.Builder // text of the line being received
	flush := func(all bool) {
		s := partial.String()
		for {
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				break
			}
			if show {
				fmt.Fprintln(w.o.Progress, strings.TrimRight(s[:i], "\r"))
			}
			s = s[i+1:]
		}
		if all && s != "" {
			if show {
				fmt.Fprintln(w.o.Progress, s)
			}
			s = ""
		}
		partial.Reset()
		partial.WriteString(s)
	}
	// Base images pulled by FROM report layer progress, shown like a pull.
	p := newProgress(w.o.Progress, w.o.ProgressTTY, !show)
	defer p.done()
	dec := json.NewDecoder(r)
	for {
		var m buildMessage
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			flush(true)
			return nil
		} else if err != nil {
			flush(true)
			return fmt.Errorf("cannot read the build output: %v", err)
		}
		if m.Stream != "" {
			partial.WriteString(m.Stream)
			flush(false)
		}
		if m.Status != "" {
			flush(true)
			p.update(m.ID, m.Status, m.Progress)
		}
		msg := m.Error
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			msg = m.ErrorDetail.Message
		}
		if msg != "" {
			flush(true)
			return errors.New(strings.TrimSpace(msg))
		}
	}
}

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

// dockerignore holds the patterns of a context's .dockerignore, in file order.
type dockerignore struct {
	patterns []ignorePattern
	except   bool // some pattern is an exception (!pattern)
}

type ignorePattern struct {
	segs   []string
	negate bool
}

func readDockerignore(dir string) (*dockerignore, error) { return readIgnoreFile(dir, ".dockerignore") }

// readIgnoreFile reads a file of .dockerignore syntax in dir; a missing one leaves
// nothing out.
func readIgnoreFile(dir, name string) (*dockerignore, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return &dockerignore{}, nil
	} else if err != nil {
		return nil, failed("cannot read %s: %v", filepath.Join(dir, name), err)
	}
	return parseDockerignore(string(b)), nil
}

func parseDockerignore(text string) *dockerignore {
	ig := &dockerignore{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := ignorePattern{}
		if strings.HasPrefix(line, "!") {
			p.negate = true
			ig.except = true
			line = strings.TrimSpace(line[1:])
		}
		line = strings.TrimPrefix(path.Clean("/"+filepath.ToSlash(line)), "/")
		if line == "" {
			continue // "/" or "." would exclude the whole context
		}
		p.segs = strings.Split(line, "/")
		ig.patterns = append(ig.patterns, p)
	}
	return ig
}

// excluded reports whether the slash path rel is left out: the last pattern that
// matches it, or one of its parent dirs, decides.
func (ig *dockerignore) excluded(rel string) bool {
	segs := strings.Split(rel, "/")
	out := false
	for _, p := range ig.patterns {
		for n := len(segs); n > 0; n-- {
			if matchSegs(p.segs, segs[:n]) {
				out = !p.negate
				break
			}
		}
	}
	return out
}

// matchSegs matches path segments against pattern segments; ** matches any number
// of segments.
func matchSegs(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(segs); i++ {
				if matchSegs(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], segs[0]); err != nil || !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}
