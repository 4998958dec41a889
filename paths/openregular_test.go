package paths

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOpenRegular: a regular file opens; a FIFO (which would hang a plain
// open) and a directory are refused as not regular, a symbolic link with ELOOP.
func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, st, err := OpenRegular(file, os.O_RDONLY, 0)
	if err != nil || st.Size() != 1 {
		t.Fatalf("a regular file: %v", err)
	}
	f.Close()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, dir} {
		if _, st, err := OpenRegular(p, os.O_RDONLY, 0); !errors.Is(err, ErrNotRegular) || st == nil {
			t.Errorf("%s: got %v, want ErrNotRegular with its FileInfo", p, err)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenRegular(link, os.O_RDONLY, 0); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("a link: got %v, want ELOOP", err)
	}
}
