package control

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/supervisor"
)

// The tar streams of the files API (files.go) a caller sends: one file made
// into an archive, an archive checked before a sandbox gets it, and the bound
// of a body.

// fileArchive writes a tar stream of one regular file, name, of u.
func fileArchive(w io.Writer, name string, u Upload) error {
	tw := tar.NewWriter(w)
	h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(u.Mode), Size: u.Size, ModTime: time.Now()}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	n, err := io.Copy(tw, u.Body)
	if err != nil && !errors.Is(err, io.ErrClosedPipe) {
		return errorf(ErrInvalidRequest, "cannot read the body: %v", err)
	}
	if err == nil && n < u.Size {
		return errorf(ErrInvalidRequest, "the body ended after %d of its %d bytes (Content-Length)", n, u.Size)
	}
	if err != nil {
		return err
	}
	return tw.Close()
}

// checkArchive copies the caller's tar stream to w, refusing what a sandbox
// must not get: an entry named from / or with a .. part, a hard link to such
// a name, an entry below a symbolic link of the archive (extracting it would
// follow the link), and devices or FIFOs.
func checkArchive(w io.Writer, r io.Reader) error {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	links := map[string]bool{}
	bad := func(h *tar.Header, format string, a ...any) error {
		return errorf(ErrInvalidRequest, "cannot extract the archive: entry %q %s", h.Name, fmt.Sprintf(format, a...))
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return errorf(ErrInvalidRequest, "cannot read the archive (Content-Type: application/x-tar): %v", err)
		}
		switch h.Typeflag {
		case tar.TypeReg, '\x00', tar.TypeDir, tar.TypeSymlink, tar.TypeLink:
		case tar.TypeXGlobalHeader:
			continue
		default:
			return bad(h, "is a %s: only files, directories and links are extracted", supervisor.TarEntryKind(h.Typeflag))
		}
		name, err := archiveName(h.Name)
		if err != nil {
			return bad(h, "%v", err)
		}
		if h.Typeflag == tar.TypeLink {
			if _, err := archiveName(h.Linkname); err != nil {
				return bad(h, "links to %q: %v", h.Linkname, err)
			}
		}
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if links[d] {
				return bad(h, "is below %s, a symbolic link of the archive: it would be followed", d)
			}
		}
		if h.Typeflag == tar.TypeSymlink {
			links[name] = true
		} else {
			delete(links, name)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	return tw.Close()
}

// archiveName is an entry's name below the folder it is extracted into: not
// from /, no .. part ("." for the folder itself).
func archiveName(name string) (string, error) {
	if strings.HasPrefix(name, "/") {
		return "", errors.New("is named from / (names are relative to the path)")
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", errors.New("has a .. part")
		}
	}
	return path.Clean(name), nil
}

// boundReader reads at most left bytes; past them it fails and says so (over).
type boundReader struct {
	r    io.Reader
	left int64
	over bool
}

func (b *boundReader) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		b.over = true
		return n + int(b.left), ErrTooLarge
	}
	return n, err
}
