package manifest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// MaxLayerSize is the largest layer file a load reads (a manifest, a preset, a
// compose file or one it names, an env file): a larger one is refused, so that a
// file a sandbox planted (a link to /dev/zero, a huge file) cannot exhaust the
// CLI's memory.
const MaxLayerSize = 4 << 20

// ErrLayerLink and ErrLayerNotRegular are the two kinds of layer file a load
// refuses: a symbolic link (its target could be any file of the host, whose
// change times say nothing of the link) and anything that is not a regular
// file (a FIFO would block the load, a device would never end).
var (
	ErrLayerLink       = errors.New("is a symbolic link; a manifest layer must be a regular file (replace the link with a copy of the file)")
	ErrLayerNotRegular = errors.New("is not a regular file")
)

// LayerError is a layer file the load refuses to read.
type LayerError struct {
	Path string
	Err  error
	// Detail adds what was found (the link's target, the kind of file).
	Detail string
}

func (e *LayerError) Error() string {
	msg := e.Path + " " + e.Err.Error()
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

func (e *LayerError) Unwrap() error { return e.Err }

// ReadLayer reads a layer file as every load does: without following a
// symbolic link at its last component, regular files only, never blocking (a
// FIFO is refused, not waited on), at most MaxLayerSize bytes. A missing file is
// an error that wraps fs.ErrNotExist.
func ReadLayer(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			detail := ""
			if target, lerr := os.Readlink(path); lerr == nil {
				detail = "to " + target
			}
			return nil, &LayerError{Path: path, Err: ErrLayerLink, Detail: detail}
		}
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &LayerError{Path: path, Err: ErrLayerNotRegular, Detail: fileKind(st.Mode())}
	}
	if st.Size() > MaxLayerSize {
		return nil, &LayerError{Path: path, Err: fmt.Errorf("is larger than %d MiB", MaxLayerSize>>20), Detail: fmt.Sprintf("%d bytes", st.Size())}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxLayerSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxLayerSize {
		return nil, &LayerError{Path: path, Err: fmt.Errorf("is larger than %d MiB", MaxLayerSize>>20)}
	}
	return data, nil
}

// CheckLayerDirs refuses a layer file below root (the project dir) reached
// through a symbolic link to a directory between root and the file: a sandbox
// that replaced a folder of the project by a link would otherwise swap every
// layer in it for files whose change times it did not make. Paths outside root
// are not examined.
func CheckLayerDirs(root, path string) error {
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == "." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || rel == ".." {
		return nil
	}
	dir := root
	parts := strings.Split(filepath.Dir(rel), string(filepath.Separator))
	for _, part := range parts {
		if part == "." || part == "" {
			continue
		}
		dir = filepath.Join(dir, part)
		st, err := os.Lstat(dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // the file is absent too
			}
			return err
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			detail := ""
			if target, lerr := os.Readlink(dir); lerr == nil {
				detail = dir + " links to " + target
			}
			return &LayerError{Path: path, Err: errors.New("is reached through a symbolic link to a folder; a manifest layer in the project must be reached through real folders"), Detail: detail}
		}
	}
	return nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + m.String()
}
