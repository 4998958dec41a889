package docker

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestFitCaches: a sandbox user that is not root gets a cache of its own,
// owned by it, for each tool cache of the host it cannot write; a cache it can
// write stays shared, as every cache does for root, and a mount that is not a
// tool's cache is never moved. A link where its cache would be is refused
// with a warning, never followed.
func TestFitCaches(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to other owners")
	}
	home := t.TempDir()
	rt := &Runtime{Getenv: func(k string) (string, bool) { return home, k == "HOME" }}
	mkdir := func(rel string, mode os.FileMode, uid int) string {
		t.Helper()
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rootBuild := mkdir(".cache/go-build", 0o755, 0)
	mkdir(".cache/go-build/00", 0o755, 0)
	shared := mkdir("shared-npm", 0o777, 0)
	plain := mkdir("plain", 0o755, 0)
	plan := func() *hostPlan {
		return &hostPlan{Binds: []bind{
			{Name: "tools.go", Source: rootBuild, Target: "/var/cache/airlock/go-build", Cache: "go-build"},
			{Name: "tools.npm", Source: shared, Target: "/var/cache/airlock/npm", Cache: "npm"},
			{Name: "mounts.plain", Source: plain, Target: "/plain"},
			{Name: "tools.go", Source: "/usr/local/go", Target: GoToolchainIn, ReadOnly: true},
		}}
	}

	u := sandboxUser{UID: 1234, GID: 1234, Groups: []int{1234}}
	hp := plan()
	if w := rt.planner().fitCaches(hp, u); len(w) != 0 {
		t.Errorf("warnings: %q", w)
	}
	own := filepath.Join(home, ".cache/airlock/uid-1234/go-build")
	want := []string{own, shared, plain, "/usr/local/go"}
	for i, b := range hp.Binds {
		if b.Source != want[i] {
			t.Errorf("%s -> %s: source %s, want %s", b.Name, b.Target, b.Source, want[i])
		}
	}
	if why := notWritable(own, u); why != "" {
		t.Errorf("uid 1234 cannot write its cache: %s", why)
	}
	// Twice is the same, and root shares every cache.
	if hp := plan(); len(rt.planner().fitCaches(hp, u)) != 0 || hp.Binds[0].Source != own {
		t.Errorf("the second plan: %+v", hp.Binds[0])
	}
	if hp := plan(); len(rt.planner().fitCaches(hp, sandboxUser{})) != 0 || hp.Binds[0].Source != rootBuild {
		t.Errorf("root: %+v", hp.Binds[0])
	}

	// A link planted where uid 5678's cache goes is not followed.
	target := mkdir("elsewhere", 0o755, 0)
	if err := os.MkdirAll(filepath.Join(home, ".cache/airlock/uid-5678"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(home, ".cache/airlock/uid-5678/go-build")); err != nil {
		t.Fatal(err)
	}
	hp = plan()
	w := rt.planner().fitCaches(hp, sandboxUser{UID: 5678, GID: 5678})
	if len(w) != 1 || !strings.Contains(w[0], "uid-5678/go-build: not a folder") || hp.Binds[0].Source != rootBuild {
		t.Errorf("a link: warnings %q, source %s", w, hp.Binds[0].Source)
	}
	if st, err := os.Stat(target); err != nil || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("the link's target was given away: %v", err)
	}
}
