package docker

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/container"

	"github.com/airlock-dev/airlock/manifest"
)

// copyIn copies every [copies] entry into the created (not yet started) container
// through the Engine API, owned by the sandbox user. The archive is streamed, never
// held in memory or written to disk.
func (rt *Runtime) copyIn(ctx context.Context, containerID string, r *manifest.Resolved, u sandboxUser) error {
	for _, name := range slices.Sorted(maps.Keys(r.Copies)) {
		c := r.Copies[name]
		src := rt.expandHost(c.Source, r.ProjectDir)
		if _, err := os.Lstat(src); err != nil {
			return configErr("copies.%s.source: %s: %v", name, src, err)
		}
		target := strings.TrimPrefix(path.Clean(inHome(c.Target, u.Home)), "/")
		pr, pw := io.Pipe()
		go func() {
			pw.CloseWithError(writeTree(pw, src, target, c.Exclude, u))
		}()
		err := rt.copyTo(ctx, containerID, "/", pr, container.CopyToContainerOptions{AllowOverwriteDirWithFile: true})
		pr.CloseWithError(err)
		if err != nil {
			return failed("cannot copy copies.%s (%s) into the sandbox: %v", name, src, err)
		}
	}
	return nil
}

// excluded reports whether rel (a path relative to the copy's source) matches a pattern,
// by its base name or by its whole relative path.
func excluded(rel string, patterns []string) bool {
	base := path.Base(rel)
	for _, p := range patterns {
		if ok, _ := path.Match(p, base); ok {
			return true
		}
		if ok, _ := path.Match(p, rel); ok {
			return true
		}
	}
	return false
}

// writeTree writes src as a tar archive whose entries sit under target, owned by u.
func writeTree(w io.Writer, src, target string, exclude []string, u sandboxUser) error {
	tw := tar.NewWriter(w)
	if err := writeTreeTo(tw, src, target, func(rel string) bool { return excluded(rel, exclude) }, u); err != nil {
		return err
	}
	return tw.Close()
}

// writeTreeTo writes src's entries under target to tw, leaving out the relative
// slash paths skip reports (and everything below a skipped directory).
func writeTreeTo(tw *tar.Writer, src, target string, skip func(rel string) bool, u sandboxUser) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		rel = filepath.ToSlash(rel)
		if rel != "." && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return fmt.Errorf("cannot copy %s: %w", p, err)
		}
		hdr.Name = target
		if rel != "." {
			hdr.Name = path.Join(target, rel)
		}
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = u.UID, u.GID, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("cannot copy %s: %w", p, err)
			}
		}
		return nil
	})
}
