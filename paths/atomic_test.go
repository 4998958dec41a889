package paths

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteFileAtomic: the file gets the content and the mode (whatever the
// umask), replaces an older one, and no temporary file is left.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(p, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	st, _ := os.Stat(p)
	if err != nil || string(b) != "new" || st.Mode().Perm() != 0o600 {
		t.Fatalf("got %q (%v), mode %v; want \"new\", 0600", b, err, st.Mode())
	}
	if err := WriteAtomic(p, strings.NewReader("streamed"), 0o640); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "streamed" {
		t.Fatalf("WriteAtomic: got %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the directory holds %d entries, want only the file", len(entries))
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("broken stream") }

// TestWriteAtomicFailure: a failed write leaves the old file as it was and no
// temporary file; Cleanup after Commit keeps the file.
func TestWriteAtomicFailure(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(p, failingReader{}, 0o644); err == nil || !strings.Contains(err.Error(), "broken stream") {
		t.Fatalf("got %v, want the reader's error", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("the old content is gone: %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("a temporary file is left: %v", entries)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "f"), nil, 0o644); err == nil {
		t.Fatal("a file in a missing directory was written")
	}

	f, err := CreateAtomic(p, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.NoSync = true
	if _, err := f.WriteString("committed"); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	f.Cleanup()
	if b, _ := os.ReadFile(p); string(b) != "committed" {
		t.Fatalf("got %q after Commit and Cleanup", b)
	}
	if err := f.Commit(); err == nil {
		t.Fatal("a second Commit succeeded")
	}
}
