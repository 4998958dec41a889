package supervisor

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestInstallCopiesExecutable: install puts an exact copy of the running
// executable at the destination, mode 0755, creating its folder, and replaces
// a file already there; no temporary file is left beside it.
func TestInstallCopiesExecutable(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "bin", "sub", "airlock")
	for range 2 { // the second time over the first copy
		if err := Install(dest); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s (%d bytes) differs from %s (%d bytes)", dest, len(got), exe, len(want))
	}
	st, err := os.Stat(dest)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(dest))
	if len(entries) != 1 {
		t.Errorf("the folder holds %d entries, want only airlock: %v", len(entries), entries)
	}
}

// TestInstallFailureNamesDestination: a destination under a file fails with an
// error naming it.
func TestInstallFailureNamesDestination(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(file, "airlock")
	err := Install(dest)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("cannot install the supervisor at "+dest)) {
		t.Fatalf("want an error naming %s, got %v", dest, err)
	}
}
