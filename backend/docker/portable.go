package docker

import (
	"archive/tar"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/manifest"
)

// What another backend (a Kubernetes cluster) shares with the Docker Engine's
// besides package backend: the project's and the copies' archives. Host files
// (mounts, builtin tools) have no place there.

// Capabilities are the capabilities to add and drop, in the Engine's form.
func Capabilities(r *manifest.Resolved) (add, drop []string, err error) { return capabilities(r) }

// WriteProjectArchive writes the project dir as a tar archive of paths relative to
// "/" (its parents first, so they exist in any image), owned by uid:gid, leaving out
// what .airlockignore names: what a copied-in project is on every backend.
func WriteProjectArchive(w io.Writer, dir string, uid, gid int) error {
	ig, err := readIgnoreFile(dir, IgnoreFile)
	if err != nil {
		return err
	}
	return writeProjectArchive(w, dir, ig, sandboxUser{UID: uid, GID: gid})
}

func writeProjectArchive(w io.Writer, dir string, ig *dockerignore, u sandboxUser) error {
	target := strings.TrimPrefix(path.Clean(filepath.ToSlash(dir)), "/")
	tw := tar.NewWriter(w)
	parts := strings.Split(target, "/")
	for i := 1; i < len(parts); i++ {
		if err := tw.WriteHeader(&tar.Header{Name: strings.Join(parts[:i], "/") + "/", Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
			return err
		}
	}
	if err := writeTreeTo(tw, dir, target, func(rel string) bool { return ig.excluded(rel) }, u); err != nil {
		return err
	}
	return tw.Close()
}

// WriteProjectTree writes the project dir as a tar archive of paths under its
// base name, leaving out what .airlockignore names: what a client writes into
// the project dir's parent through the daemon's files API (ClientFiles).
func WriteProjectTree(w io.Writer, dir string) error {
	ig, err := readIgnoreFile(dir, IgnoreFile)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	if err := writeTreeTo(tw, dir, filepath.Base(dir), func(rel string) bool { return ig.excluded(rel) }, sandboxUser{}); err != nil {
		return err
	}
	return tw.Close()
}

// WriteCopyTree writes [copies.name] of r as a tar archive of paths under its
// target's base name: what a client writes into the target's parent through
// the daemon's files API (ClientFiles). A source starting with ~ is under
// hostHome, a relative one under the project dir; a missing one is a config
// error naming the entry.
func WriteCopyTree(w io.Writer, r *manifest.Resolved, name, hostHome string) error {
	c := r.Copies[name]
	src := ExpandHostPath(c.Source, r.ProjectDir, hostHome)
	if _, err := os.Lstat(src); err != nil {
		return configErr("copies.%s.source: %s: %v", name, src, err)
	}
	tw := tar.NewWriter(w)
	exclude := c.Exclude
	if err := writeTreeTo(tw, src, path.Base(path.Clean(c.Target)), func(rel string) bool { return excluded(rel, exclude) }, sandboxUser{}); err != nil {
		return failed("cannot copy copies.%s (%s) into the sandbox: %v", name, src, err)
	}
	return tw.Close()
}

// WriteCopiesArchive writes every [copies] entry of r as one tar archive of paths
// relative to "/", owned by uid:gid, a target under ~ placed in home. A source
// starting with ~ is under hostHome; a relative one under the project dir. A
// missing source is a config error naming the entry.
func WriteCopiesArchive(w io.Writer, r *manifest.Resolved, uid, gid int, home, hostHome string) error {
	u := sandboxUser{UID: uid, GID: gid, Home: home}
	tw := tar.NewWriter(w)
	for _, name := range slices.Sorted(maps.Keys(r.Copies)) {
		c := r.Copies[name]
		src := ExpandHostPath(c.Source, r.ProjectDir, hostHome)
		if _, err := os.Lstat(src); err != nil {
			return configErr("copies.%s.source: %s: %v", name, src, err)
		}
		target := strings.TrimPrefix(path.Clean(inHome(c.Target, home)), "/")
		exclude := c.Exclude
		if err := writeTreeTo(tw, src, target, func(rel string) bool { return excluded(rel, exclude) }, u); err != nil {
			return failed("cannot copy copies.%s (%s) into the sandbox: %v", name, src, err)
		}
	}
	return tw.Close()
}
