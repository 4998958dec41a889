package supervisor

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// TarOptions are the inputs of Tar.
type TarOptions struct {
	// Dir is the folder relative paths are taken from ("": the working
	// directory); an absolute path is taken as it is.
	Dir   string
	Paths []string
	Out   io.Writer
	// Warn receives a line for each file left out; nil drops them.
	Warn func(string)
}

// Tar writes a tar archive of paths to o.Out: `airlock supervise tar`, which
// the Kubernetes backend runs as an exec to copy `run --output` results back,
// as the Docker backend does through the Engine's archive API. The layout is
// the Engine's (what sandbox's CopyOut reads): each path's entries are named
// from its base name ("dist", "dist/app.js"), folders with a trailing slash.
// Symbolic links are archived as links, never followed below a path; a socket
// is left out with a warning. A file's content is what it held when it was
// listed: one that grows meanwhile is cut there, one that shrinks is an error.
func Tar(o TarOptions) error {
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	tw := tar.NewWriter(o.Out)
	for _, p := range o.Paths {
		full := p
		if !filepath.IsAbs(p) {
			full = filepath.Join(o.Dir, p)
		}
		base := filepath.Base(full)
		if base == string(filepath.Separator) || base == "." || base == ".." {
			return fmt.Errorf("cannot archive %s: name a file or folder below /", p)
		}
		if err := tarTree(tw, full, base, o.Warn); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("cannot write the archive: %w", err)
	}
	return nil
}

func tarTree(tw *tar.Writer, src, base string, warn func(string)) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("cannot archive %s: %w", p, err)
		}
		rel, _ := filepath.Rel(src, p)
		name := base
		if rel != "." {
			name = path.Join(base, filepath.ToSlash(rel))
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("cannot archive %s: %w", p, err)
		}
		if info.Mode()&fs.ModeSocket != 0 {
			warn(fmt.Sprintf("left out %s: a socket", p))
			return nil
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return fmt.Errorf("cannot archive %s: %w", p, err)
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return fmt.Errorf("cannot archive %s: %w", p, err)
		}
		hdr.Name = name
		if info.IsDir() {
			hdr.Name += "/"
		}
		if !info.Mode().IsRegular() {
			if err := tw.WriteHeader(hdr); err != nil {
				return fmt.Errorf("cannot write the archive: %w", err)
			}
			return nil
		}
		// Opened before the header is written, so a file removed meanwhile
		// is an error naming it, not a broken archive.
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("cannot archive %s: %w", p, err)
		}
		defer f.Close()
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("cannot write the archive: %w", err)
		}
		if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("cannot archive %s: it shrank while being read", p)
			}
			return fmt.Errorf("cannot archive %s: %w", p, err)
		}
		return nil
	})
}
