package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
