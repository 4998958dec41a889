package testenv

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
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

// TestPollPause: Eventually pauses at least 20 ms, as long as the last try took
// and a tenth of the wait so far, at most 250 ms.
func TestPollPause(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct{ since, took, want time.Duration }{
		{0, 0, 20 * ms},
		{100 * ms, ms, 20 * ms},
		{time.Second, ms, 100 * ms},
		{time.Second, 150 * ms, 150 * ms},
		{time.Minute, ms, 250 * ms},
		{0, time.Second, 250 * ms},
	} {
		if got := pollPause(c.since, c.took); got != c.want {
			t.Errorf("pollPause(%v, %v) = %v, want %v", c.since, c.took, got, c.want)
		}
	}
}
