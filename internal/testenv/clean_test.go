package testenv

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestAddedEntries: what RunClean reports after the tests: new files, and a new
// directory once (not its content); nothing when the tree is as it was.
func TestAddedEntries(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.go")
	write("testdata/x.txt")
	before, err := treeEntries(dir)
	if err != nil {
		t.Fatal(err)
	}
	if added, err := addedEntries(dir, before); err != nil || len(added) != 0 {
		t.Fatalf("an unchanged tree: %v, %v", added, err)
	}
	write("out.log")
	write("testdata/new.txt")
	write("0b8e-uuid/exec.stdout.log")
	write("0b8e-uuid/exec.stderr.log")
	if err := os.Remove(filepath.Join(dir, "a.go")); err != nil {
		t.Fatal(err)
	}
	added, err := addedEntries(dir, before)
	if want := []string{"0b8e-uuid/", "out.log", "testdata/new.txt"}; err != nil || !slices.Equal(added, want) {
		t.Fatalf("got %q, %v; want %q", added, err, want)
	}
}
