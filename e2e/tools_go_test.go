package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// tools = ["go"] mounts the host's Go toolchain (its GOROOT, read-only) and puts
// its bin in front of PATH, so an image without Go runs the host's go; and
// sandbox.path_prepend puts directories in front of the image's PATH (never the
// host's), for the main command, daemons and exec.

// TestToolGoToolchain: on the busybox image (no Go in it) `go version` is the
// host's and `go test` passes on a module of the project; the main command's,
// a daemon's and an exec's PATH are path_prepend's dirs, the toolchain's bin,
// then the image's PATH as it is.
func TestToolGoToolchain(t *testing.T) {
	limit(t)
	e := newEnv(t, `
tools = ["go"]

[sandbox]
image = "{{image}}"
network = "none"
path_prepend = ["/opt/extra/bin"]

[env]
GOTOOLCHAIN = "local"

[daemons.d]
command = ["sh", "-c", "echo \"$PATH\" > /tmp/d.path; exec sleep 300"]
ready = { cmd = ["test", "-s", "/tmp/d.path"], timeout = "20s" }
`)
	goroot := hostGo(t, "env", "GOROOT")
	version := hostGo(t, "version")
	// The host's build cache: `go test` in the sandbox reuses what the host built.
	e.Extra = append(e.Extra, "GOCACHE="+hostGo(t, "env", "GOCACHE"))
	e.WriteFile("mod/go.mod", "module example.com/m\n\ngo 1.21\n")
	e.WriteFile("mod/m.go", "package m\n\nfunc Double(x int) int { return 2 * x }\n")
	e.WriteFile("mod/m_test.go", "package m\n\nimport \"testing\"\n\nfunc TestDouble(t *testing.T) {\n\tif Double(21) != 42 {\n\t\tt.Fatal(Double(21))\n\t}\n}\n")

	img, err := e.Cli.ImageInspect(context.Background(), e.Image)
	if err != nil {
		t.Fatal(err)
	}
	var imagePath string
	for _, kv := range img.Config.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			imagePath = v
		}
	}
	if imagePath == "" {
		t.Fatalf("the test image %s sets no PATH", e.Image)
	}
	wantPath := "/opt/extra/bin:/airlock/go/bin:" + imagePath

	r := e.Run("run", "--", "sh", "-c", `go version; echo "$PATH"; cat /tmp/d.path; cd mod && go test ./...`)
	if r.Code != 0 {
		t.Fatalf("want exit 0, got %s", r)
	}
	lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	if len(lines) != 4 || lines[0] != version || lines[1] != wantPath || lines[2] != wantPath || !strings.HasPrefix(lines[3], "ok  \texample.com/m") {
		t.Errorf("want\n%s\n%s\n%s\nok  \texample.com/m …\ngot %s", version, wantPath, wantPath, r)
	}
	if strings.Contains(r.Stderr, "tools.go") {
		t.Errorf("a warning about the go tool: %s", r.Stderr)
	}

	// The toolchain is the host's GOROOT, read-only; an exec gets the same PATH.
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	r = e.Run("exec", "--", "sh", "-c", `echo "$PATH"; ls /airlock/go/VERSION; touch /airlock/go/x 2>/dev/null || echo read-only`)
	if want := wantPath + "\n/airlock/go/VERSION\nread-only\n"; r.Code != 0 || r.Stdout != want {
		t.Errorf("exec: want exit 0 and\n%s\ngot %s", want, r)
	}
	mounts := ""
	for _, c := range e.Containers() {
		if c.Labels["dev.airlock.role"] == "primary" {
			for _, m := range c.Mounts {
				mounts += m.Source + " -> " + m.Destination + " rw=" + boolString(m.RW) + "\n"
			}
		}
	}
	contains(t, "the primary's mounts", mounts, goroot+" -> /airlock/go rw=false\n")
	e.MustRun("rm", "-f", id)
	e.assertClean()
}

// hostGo runs the host's go (the one on PATH, as the daemon finds it) and
// returns its output without the trailing newline.
func hostGo(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Env = append(cmd.Environ(), "GOTOOLCHAIN=local")
	cmd.Dir = "/"
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

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

// TestToolEnvTravelsWithTheRequest: GOCACHE on a run's command line is the
// cache the go tool mounts, although the control daemon was started by an
// earlier command with another environment.
func TestToolEnvTravelsWithTheRequest(t *testing.T) {
	limit(t)
	e := newEnv(t, "tools = [\"go\"]\n[sandbox]\nimage = \"{{image}}\"\nnetwork = \"none\"\n")
	e.MustRun("daemon", "start")
	mine := filepath.Join(t.TempDir(), "gocache")
	r := e.RunEnv([]string{"GOCACHE=" + mine}, "run", "--", "sh", "-c", `touch "$GOCACHE/probe"`)
	if r.Code != 0 {
		t.Fatalf("run: %s", r)
	}
	if _, err := os.Stat(filepath.Join(mine, "probe")); err != nil {
		t.Errorf("the run's GOCACHE was not the cache mounted: %v", err)
	}
}
