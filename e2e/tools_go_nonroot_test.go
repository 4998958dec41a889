//go:build projects

package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// goModule writes a module under mod/ with a small package (it imports
// strings): `go vet ./...` compiles and caches what it imports, as a user's
// first go command writes to its caches, without the cold build of the
// testing package's part of the standard library (a minute of CPU).
func goModule(e *env) {
	e.WriteFile("mod/go.mod", "module example.com/m\n\ngo 1.21\n")
	e.WriteFile("mod/strx/strx.go", "package strx\n\nimport \"strings\"\n\n// Shout is s in upper case.\nfunc Shout(s string) string { return strings.ToUpper(s) }\n")
}

// TestToolGoNonRootUser: the go preset with a sandbox user that is not root
// (nobody, which the image has, and 1234:1234, which it has not) runs a
// module's `go test ./...` with no warning: the host's caches (created by
// root) are not writable by that user, so it gets caches of its own, one per
// uid, which airlock keeps on the host. Root still shares the host's cache; a
// GOCACHE of [env] wins over the tool's; a host GOCACHE the user can write is
// shared with it.
func TestToolGoNonRootUser(t *testing.T) {
	limit(t)
	manifest := func(user, env string) string {
		return `
presets = ["go"]

[sandbox]
image = "{{image}}"
network = "none"
user = "` + user + `"
` + env
	}
	e := newEnv(t, manifest("nobody", ""))
	goModule(e)
	hostCache := filepath.Join(e.Home, ".cache", "go-build")

	for _, user := range []string{"nobody", "1234:1234"} {
		e.WriteManifest(manifest(user, ""))
		// A module's go vet (it compiles the package's imports into the
		// cache) and go test as nobody and as 1234 (a uid with no passwd
		// entry): each user's own cache written and go working.
		cmd, want := `id -u; cd mod && go vet ./... && go test ./... && echo vetted`, "vetted"
		r := e.Run("run", "--", "sh", "-c", cmd)
		if r.Code != 0 || !strings.Contains(r.Stdout, want) {
			t.Errorf("user %s: want exit 0 and %s, got %s", user, want, r)
		}
		if strings.Contains(r.Stderr, "warning") {
			t.Errorf("user %s: a warning: %s", user, r.Stderr)
		}
	}
	// Their caches are airlock's, one per uid, owned by that user.
	for _, uid := range []uint32{65534, 1234} {
		dir := filepath.Join(e.Home, ".cache", "airlock", fmt.Sprintf("uid-%d", uid), "go-build")
		entries, err := os.ReadDir(dir)
		st, serr := os.Stat(dir)
		if err != nil || serr != nil || len(entries) < 100 || st.Sys().(*syscall.Stat_t).Uid != uid {
			t.Errorf("uid %d's build cache %s: %d entries, %v, %v", uid, dir, len(entries), err, serr)
		}
	}
	// What nobody and 1234 built is not in the host's (root's) cache.
	filepath.WalkDir(hostCache, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			if st, err := os.Lstat(p); err == nil && st.Sys().(*syscall.Stat_t).Uid != 0 {
				t.Errorf("%s in the host's cache is owned by uid %d", p, st.Sys().(*syscall.Stat_t).Uid)
				return filepath.SkipAll
			}
		}
		return nil
	})

	// Root shares the host's cache: what it writes there is on the host.
	e.WriteManifest(manifest("root", ""))
	r := e.Run("run", "--", "sh", "-c", `touch "$(go env GOCACHE)/root-probe" && go env GOCACHE`)
	if r.Code != 0 || r.Stdout != "/var/cache/airlock/go-build\n" || strings.Contains(r.Stderr, "warning") {
		t.Errorf("root: want exit 0 and /var/cache/airlock/go-build without a warning, got %s", r)
	}
	if _, err := os.Stat(filepath.Join(hostCache, "root-probe")); err != nil {
		t.Errorf("root's cache is not the host's: %v", err)
	}

	// A GOCACHE of [env] is the one go uses.
	e.WriteManifest(manifest("nobody", "\n[env]\nGOCACHE = \"/tmp/x\"\n"))
	r = e.Run("run", "--", "go", "env", "GOCACHE")
	if r.Code != 0 || r.Stdout != "/tmp/x\n" || strings.Contains(r.Stderr, "warning") {
		t.Errorf("[env] GOCACHE: want exit 0 and /tmp/x without a warning, got %s", r)
	}

	// A host GOCACHE that the sandbox user can write is shared with it. The
	// daemon plans with the environment of the CLI that started it.
	e.StopDaemon()
	mine := filepath.Join(t.TempDir(), "gocache-1234")
	if err := os.Mkdir(mine, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(mine, 1234, 1234); err != nil {
		t.Fatal(err)
	}
	e.WriteManifest(manifest("1234:1234", ""))
	r = e.RunEnv([]string{"GOCACHE=" + mine}, "run", "--", "sh", "-c", `touch "$GOCACHE/probe"`)
	if r.Code != 0 || strings.Contains(r.Stderr, "warning") {
		t.Errorf("host GOCACHE of uid 1234: want exit 0 without a warning, got %s", r)
	}
	if _, err := os.Stat(filepath.Join(mine, "probe")); err != nil {
		t.Errorf("the host's GOCACHE writable by uid 1234 is not its cache: %v", err)
	}
	e.assertClean()
}
