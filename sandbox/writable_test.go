package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNotWritable: a mount source the sandbox user cannot write is found by its
// owner, group and mode, as are folders right in it that it cannot write (the
// state a root sandbox leaves a shared cache in), and nothing is said of what
// it can write.
func TestNotWritable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make files of other owners")
	}
	dir := t.TempDir()
	mk := func(rel string, mode os.FileMode, uid, gid int) string {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	user := sandboxUser{UID: 1000, GID: 1000, Groups: []int{1000, 2000}}
	rootCache := mk("root-cache", 0o755, 0, 0)
	mine := mk("mine", 0o755, 1000, 1000)
	mk("mine/00", 0o755, 1000, 1000)
	spoiled := mk("spoiled", 0o755, 1000, 1000)
	mk("spoiled/00", 0o755, 1000, 1000)
	mk("spoiled/3f", 0o755, 0, 0)
	mk("spoiled/a1", 0o700, 0, 0)
	group := mk("group", 0o775, 0, 2000)
	other := mk("other", 0o777, 0, 0)
	ownerDenied := mk("owner-denied", 0o577, 1000, 0)
	file := filepath.Join(mine, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(file, 0, 0); err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]string{
		rootCache:                     "owned by 0:0, mode 0755",
		mine:                          "",
		spoiled:                       "2 of its folders, such as 3f (owned by 0:0, mode 0755), are not writable by it",
		group:                         "",
		other:                         "",
		ownerDenied:                   "owned by 1000:0, mode 0577", // the owner's bits count, not the others'
		file:                          "owned by 0:0, mode 0644",
		filepath.Join(dir, "missing"): "",
	} {
		if got := notWritable(src, user); got != want {
			t.Errorf("%s: %q, want %q", strings.TrimPrefix(src, dir), got, want)
		}
	}
}
