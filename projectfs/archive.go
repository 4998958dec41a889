package projectfs

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/manifest"
)

// The archives of what a sandbox gets from the host, the same on every
// backend: the project dir (less what .airlockignore names) and the [copies]
// entries, as tar streams, and the re-owning of an archive written into a
// sandbox through the files API.

// Project is a project dir with its .airlockignore read.
type Project struct {
	Dir    string
	ignore *dockerignore
}

// ReadProject reads dir's .airlockignore (a missing one leaves nothing out).
func ReadProject(dir string) (*Project, error) {
	ig, err := readIgnoreFile(dir, IgnoreFile)
	if err != nil {
		return nil, err
	}
	return &Project{Dir: dir, ignore: ig}, nil
}

// WriteArchive writes the project dir as a tar archive of paths relative to
// "/", owned by uid:gid, leaving out what .airlockignore names (.git is
// copied unless it is named there): what a copied-in project is on every
// backend. The folders above the project are not in it: what extracts it (the
// Engine, `supervise untar`) makes those missing (mode 0755, root's) and
// leaves those of the image as they are (an entry for /tmp made it 0755).
func (p *Project) WriteArchive(w io.Writer, uid, gid int) error {
	target := strings.TrimPrefix(path.Clean(filepath.ToSlash(p.Dir)), "/")
	tw := tar.NewWriter(w)
	if err := writeTreeTo(tw, p.Dir, target, p.ignore.excluded, uid, gid); err != nil {
		return err
	}
	return tw.Close()
}

// WriteProjectArchive writes the project dir as Project.WriteArchive does,
// reading its .airlockignore first.
func WriteProjectArchive(w io.Writer, dir string, uid, gid int) error {
	p, err := ReadProject(dir)
	if err != nil {
		return err
	}
	return p.WriteArchive(w, uid, gid)
}

// WriteProjectTree writes the project dir as a tar archive of paths under its
// base name, leaving out what .airlockignore names: what a client writes into
// the project dir's parent through the daemon's files API (ClientFiles).
func WriteProjectTree(w io.Writer, dir string) error {
	p, err := ReadProject(dir)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	if err := writeTreeTo(tw, dir, filepath.Base(dir), p.ignore.excluded, 0, 0); err != nil {
		return err
	}
	return tw.Close()
}

// CopySource is the host path of [copies.name] of r: a source starting with ~
// is under hostHome (the user's home directory when empty), a relative one
// under the project dir. A missing one is a config error naming the entry.
func CopySource(r *manifest.Resolved, name, hostHome string) (string, error) {
	src := ExpandHostPath(r.Copies[name].Source, r.ProjectDir, hostHome)
	if _, err := os.Lstat(src); err != nil {
		return "", configErr("copies.%s.source: %s: %v", name, src, err)
	}
	return src, nil
}

// WriteCopyTree writes [copies.name] of r as a tar archive of paths under its
// target's base name: what a client writes into the target's parent through
// the daemon's files API (ClientFiles). Its source is CopySource's.
func WriteCopyTree(w io.Writer, r *manifest.Resolved, name, hostHome string) error {
	c := r.Copies[name]
	src, err := CopySource(r, name, hostHome)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	if err := writeTreeTo(tw, src, path.Base(path.Clean(c.Target)), excludedBy(c.Exclude), 0, 0); err != nil {
		return failed("cannot copy copies.%s (%s) into the sandbox: %v", name, src, err)
	}
	return tw.Close()
}

// WriteCopiesArchive writes every [copies] entry of r as one tar archive of paths
// relative to "/", owned by uid:gid, a target under ~ placed in home. Each
// source is CopySource's.
func WriteCopiesArchive(w io.Writer, r *manifest.Resolved, uid, gid int, home, hostHome string) error {
	tw := tar.NewWriter(w)
	for _, name := range slices.Sorted(maps.Keys(r.Copies)) {
		c := r.Copies[name]
		src, err := CopySource(r, name, hostHome)
		if err != nil {
			return err
		}
		target := strings.TrimPrefix(path.Clean(InHome(c.Target, home)), "/")
		if err := writeTreeTo(tw, src, target, excludedBy(c.Exclude), uid, gid); err != nil {
			return failed("cannot copy copies.%s (%s) into the sandbox: %v", name, src, err)
		}
	}
	return tw.Close()
}

// WriteTree writes src as a tar archive whose entries sit under target, owned
// by uid:gid, leaving out what matches a pattern of exclude (a [copies]
// entry's, by base name or whole relative path).
func WriteTree(w io.Writer, src, target string, exclude []string, uid, gid int) error {
	tw := tar.NewWriter(w)
	if err := writeTreeTo(tw, src, target, excludedBy(exclude), uid, gid); err != nil {
		return err
	}
	return tw.Close()
}

// excludedBy reports whether rel (a path relative to the copy's source) matches a
// pattern, by its base name or by its whole relative path.
func excludedBy(patterns []string) func(rel string) bool {
	return func(rel string) bool {
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
}

// writeTreeTo writes src's entries under target to tw, owned by uid:gid,
// leaving out the relative slash paths skip reports (and everything below a
// skipped directory).
func writeTreeTo(tw *tar.Writer, src, target string, skip func(rel string) bool, uid, gid int) error {
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
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = uid, gid, "", ""
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

// OwnArchive copies the tar stream r to w with every entry owned by uid:gid
// (user and group names dropped) and, with prefix, named below those folders,
// which come first (mode 0755, uid:gid). What the archive itself says of
// owners is not kept.
func OwnArchive(w io.Writer, r io.Reader, prefix []string, uid, gid int) error {
	tw := tar.NewWriter(w)
	now := time.Now()
	for i := range prefix {
		h := &tar.Header{Typeflag: tar.TypeDir, Name: path.Join(prefix[:i+1]...) + "/", Mode: 0o755, Uid: uid, Gid: gid, ModTime: now}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("cannot write the archive: %w", err)
		}
	}
	under := path.Join(prefix...)
	err := eachEntry(r, func(err error) error { return fmt.Errorf("cannot read the archive: %w", err) }, func(h *tar.Header, body io.Reader) error {
		if h.Typeflag == tar.TypeXGlobalHeader {
			return nil
		}
		h.Uid, h.Gid, h.Uname, h.Gname = uid, gid, "", ""
		for _, k := range []string{"uid", "gid", "uname", "gname", "path", "linkpath"} {
			delete(h.PAXRecords, k)
		}
		h.Format = tar.FormatUnknown
		if under != "" {
			dirSlash := strings.HasSuffix(h.Name, "/")
			h.Name = path.Join(under, h.Name)
			if dirSlash || h.Typeflag == tar.TypeDir {
				h.Name += "/"
			}
			if h.Typeflag == tar.TypeLink {
				h.Linkname = path.Join(under, h.Linkname)
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("cannot write the archive: %w", err)
		}
		if _, err := io.Copy(tw, body); err != nil {
			return fmt.Errorf("cannot copy %s of the archive: %w", h.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("cannot write the archive: %w", err)
	}
	return nil
}

// eachEntry calls each with every entry of the tar stream r in order, and the
// entry's content. It stops at the first error: each's as it is, the
// stream's as broken makes it.
func eachEntry(r io.Reader, broken func(error) error, each func(h *tar.Header, body io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return broken(err)
		}
		if err := each(h, tr); err != nil {
			return err
		}
	}
}
