package trust

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"

	"github.com/airlock-dev/airlock/manifest"
)

// MaxStored is the largest layer content the record keeps for a diff; a larger
// file is recorded by its hash only.
const MaxStored = 1 << 20

// File is the content of one layer file as read, or its absence.
type File struct {
	Absent bool   `json:"absent,omitempty"`
	Sum    string `json:"sha256,omitempty"`
	Size   int64  `json:"size,omitempty"`
	// Content is the file's bytes when Size <= MaxStored.
	Content []byte `json:"content,omitempty"`
}

// Same reports whether f and g are the same content (or both absent).
func (f File) Same(g File) bool { return f.Absent == g.Absent && f.Sum == g.Sum }

// Stored reports whether the content is kept (a diff can be shown).
func (f File) Stored() bool { return f.Absent || f.Size <= MaxStored }

func fileOf(data []byte) File {
	sum := sha256.Sum256(data)
	f := File{Sum: hex.EncodeToString(sum[:]), Size: int64(len(data))}
	if len(data) <= MaxStored {
		f.Content = append([]byte{}, data...)
	}
	return f
}

// Snapshot is what one load of a manifest read: every layer file by absolute
// path, absent ones included.
type Snapshot struct {
	Files map[string]File
	// Root, when set, is the project dir: a layer below it reached through a
	// symbolic link to a folder is refused (manifest.CheckLayerDirs).
	Root string
}

// NewSnapshot returns an empty snapshot.
func NewSnapshot() *Snapshot { return &Snapshot{Files: map[string]File{}} }

// ReadFile reads a layer file (manifest.Loader's ReadFile) and records what it
// read: its content, or its absence.
func (s *Snapshot) ReadFile(path string) ([]byte, error) {
	if s.Root != "" {
		if err := manifest.CheckLayerDirs(s.Root, clean(path)); err != nil {
			return nil, err
		}
	}
	data, err := manifest.ReadLayer(path)
	switch {
	case err == nil:
		s.Files[clean(path)] = fileOf(data)
	case errors.Is(err, fs.ErrNotExist):
		s.Files[clean(path)] = File{Absent: true}
	}
	return data, err
}

// Add records a file that is not a manifest layer but acts as one (.airlockignore).
func (s *Snapshot) Add(path string) error {
	_, err := s.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot read %s: %w", path, err)
	}
	return nil
}

// Paths lists the files of the snapshot, sorted.
func (s *Snapshot) Paths() []string {
	out := make([]string, 0, len(s.Files))
	for p := range s.Files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func clean(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}
