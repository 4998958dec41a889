package projectfs

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// What `airlock up` sends to keep a copied project in step with the host's
// edits: the project's files by their paths, the .airlockignore rules asked
// path by path.

// Excluded reports whether the slash path rel, relative to the project dir,
// is left out of a copied project: .airlockignore names it or one of the
// directories it is in.
func (p *Project) Excluded(rel string) bool {
	return rel != "." && rel != "" && p.ignore.excluded(rel)
}

// SyncResult says what WritePaths could not send as it was: Vanished the
// paths gone when they were read, Changed the files that changed while they
// were read (their bytes in the archive may be torn: send them again).
type SyncResult struct {
	Vanished   []string
	Changed    []string
	Unreadable []string // files and directories this user cannot read: left out
	Files      int      // regular files written
}

// WritePaths writes the project's paths rels (slash paths relative to the
// project dir) as a tar archive of paths under the dir's base name, as
// WriteProjectTree does for the whole dir: each path's directories first,
// then the path; a directory with all it holds less what .airlockignore
// names. A path that is excluded, or gone, is not written (gone ones are in
// the result's Vanished).
func (p *Project) WritePaths(w io.Writer, rels []string) (*SyncResult, error) {
	res := &SyncResult{}
	base := filepath.Base(p.Dir)
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}  // directories written (alone, or with what they hold)
	whole := map[string]bool{} // paths written with all they hold
	rels = slices.Clone(rels)
	slices.Sort(rels)
	for _, rel := range rels {
		rel = path.Clean(rel)
		if strings.HasPrefix(rel, "../") || rel == ".." || p.Excluded(rel) || inWhole(whole, rel) {
			continue
		}
		// The directories on the way, so that the sandbox makes none of
		// them itself (another owner, another mode); "." is the whole dir.
		var way []string
		if rel != "." {
			way = append(way, ".")
			for d := path.Dir(rel); d != "."; d = path.Dir(d) {
				way = append(way, d)
			}
			slices.Reverse(way[1:])
		}
		missing := false
		for _, d := range way {
			if dirs[d] {
				continue
			}
			info, err := os.Lstat(filepath.Join(p.Dir, filepath.FromSlash(d)))
			if err != nil || !info.IsDir() {
				missing = true
				break
			}
			if err := writeSyncEntry(tw, p.Dir, base, d, info, res); err != nil {
				return res, err
			}
			dirs[d] = true
		}
		abs := filepath.Join(p.Dir, filepath.FromSlash(rel))
		info, err := os.Lstat(abs)
		if missing || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			res.Vanished = append(res.Vanished, rel)
			continue
		} else if err != nil {
			return res, fmt.Errorf("cannot read %s: %w", abs, err)
		}
		if !info.IsDir() {
			if err := writeSyncEntry(tw, p.Dir, base, rel, info, res); err != nil {
				return res, err
			}
			whole[rel] = true
			continue
		}
		err = filepath.WalkDir(abs, func(fp string, d fs.DirEntry, err error) error {
			r, _ := filepath.Rel(p.Dir, fp)
			r = filepath.ToSlash(r)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // gone meanwhile: its removal is an event of its own
				}
				if errors.Is(err, fs.ErrPermission) {
					res.Unreadable = append(res.Unreadable, r)
					return nil
				}
				return err
			}
			if p.Excluded(r) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			info, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			} else if err != nil {
				return err
			}
			return writeSyncEntry(tw, p.Dir, base, r, info, res)
		})
		if err != nil {
			return res, err
		}
		whole[rel], dirs[rel] = true, true
	}
	return res, tw.Close()
}

// inWhole reports whether rel or a directory it is in was written whole.
func inWhole(whole map[string]bool, rel string) bool {
	for ; rel != "."; rel = path.Dir(rel) {
		if whole[rel] {
			return true
		}
	}
	return whole["."]
}

// writeSyncEntry writes the entry rel of the project (at dir) named under
// base. A regular file that changed size while read is padded (or cut) to
// the size its header says, and named in res.Changed.
func writeSyncEntry(tw *tar.Writer, dir, base, rel string, info fs.FileInfo, res *SyncResult) error {
	abs := filepath.Join(dir, filepath.FromSlash(rel))
	link := ""
	if info.Mode()&fs.ModeSymlink != 0 {
		var err error
		if link, err = os.Readlink(abs); err != nil {
			res.Vanished = append(res.Vanished, rel)
			return nil
		}
	}
	if !info.Mode().IsRegular() && !info.IsDir() && link == "" {
		return nil // a fifo, a socket, a device: never copied
	}
	var f *os.File
	if info.Mode().IsRegular() {
		var err error
		if f, err = os.Open(abs); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				res.Vanished = append(res.Vanished, rel)
				return nil
			}
			if errors.Is(err, fs.ErrPermission) {
				res.Unreadable = append(res.Unreadable, rel)
				return nil
			}
			return fmt.Errorf("cannot read %s: %w", abs, err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			info = st // what is read is this file's
		}
	}
	hdr, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return fmt.Errorf("cannot copy %s: %w", abs, err)
	}
	hdr.Name = base
	if rel != "." {
		hdr.Name = path.Join(base, rel)
	}
	if info.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if f == nil {
		return nil
	}
	res.Files++
	n, err := io.Copy(tw, io.LimitReader(f, hdr.Size))
	if err != nil {
		return fmt.Errorf("cannot copy %s: %w", abs, err)
	}
	if n < hdr.Size {
		// Cut short while read: zeros to the size said, and sent again.
		if _, err := io.CopyN(tw, zeros{}, hdr.Size-n); err != nil {
			return err
		}
		res.Changed = append(res.Changed, rel)
	} else if st, err := f.Stat(); err == nil && (st.Size() != hdr.Size || !st.ModTime().Equal(info.ModTime())) {
		res.Changed = append(res.Changed, rel)
	}
	return nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
