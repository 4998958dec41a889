package docker

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The go tool's toolchain (no Engine): which GOROOT of the host is found, and
// when it is mounted.

// fakeGOROOT makes a Go installation under dir: bin/go (a copy of bin, or a
// script) and pkg/tool.
func fakeGOROOT(t *testing.T, dir string, bin []byte) string {
	t.Helper()
	for _, d := range []string{"bin", "pkg/tool/linux_" + runtime.GOARCH} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "go"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func envRuntime(env map[string]string) *Runtime {
	return &Runtime{Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
}

func TestHostGOROOT(t *testing.T) {
	root := t.TempDir()
	script := []byte("#!/bin/sh\necho unused\n")
	goroot := fakeGOROOT(t, filepath.Join(root, "sdk", "go1.99"), script)

	// On PATH through a symlink (/usr/bin/go -> /usr/lib/go-1.x/bin/go): resolved.
	links := filepath.Join(root, "links")
	if err := os.MkdirAll(links, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(goroot, "bin", "go"), filepath.Join(links, "go")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"GOROOT set", map[string]string{"GOROOT": goroot, "PATH": "/nonexistent"}, goroot},
		{"go on PATH", map[string]string{"PATH": "/nonexistent:" + filepath.Join(goroot, "bin")}, goroot},
		{"go on PATH through a symlink", map[string]string{"PATH": links}, goroot},
	} {
		got, err := envRuntime(c.env).planner().hostGOROOT(context.Background(), &hostPlan{})
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}

	// A wrapper script (a version manager's shim): go env GOROOT says.
	shims := filepath.Join(root, "shims")
	if err := os.MkdirAll(shims, 0o755); err != nil {
		t.Fatal(err)
	}
	shim := "#!/bin/sh\n[ \"$1 $2 $GOTOOLCHAIN\" = \"env GOROOT local\" ] || exit 3\necho " + goroot + "\n"
	if err := os.WriteFile(filepath.Join(shims, "go"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := envRuntime(map[string]string{"PATH": shims}).planner().hostGOROOT(context.Background(), &hostPlan{}); err != nil || got != goroot {
		t.Errorf("shim: got %q, %v; want %q", got, err, goroot)
	}

	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no go", map[string]string{"PATH": "/nonexistent"}, "no go on this host's PATH, and GOROOT is not set"},
		{"GOROOT not an installation", map[string]string{"GOROOT": root}, "GOROOT=" + root + " holds no Go installation"},
	} {
		if _, err := envRuntime(c.env).planner().hostGOROOT(context.Background(), &hostPlan{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// TestPlanGoToolchain: a Linux go for the Engine's architecture is mounted
// read-only with its bin in front of PATH; one for another architecture, or
// not a Linux binary, is not, with a warning.
func TestPlanGoToolchain(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the toolchain is mounted from a Linux host only")
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	native := fakeGOROOT(t, filepath.Join(t.TempDir(), "go"), self)
	script := fakeGOROOT(t, filepath.Join(t.TempDir(), "go"), []byte("#!/bin/sh\n"))
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	for _, c := range []struct {
		name, goroot, arch string
		warning            string
	}{
		{"native", native, runtime.GOARCH, ""},
		{"another architecture", native, other, "not for the Engine's linux/" + other},
		{"not a Linux binary", script, runtime.GOARCH, "is not a Linux binary"},
	} {
		rt := envRuntime(map[string]string{"GOROOT": c.goroot})
		rt.facts.arch.arch = c.arch
		hp := &hostPlan{}
		rt.planner().planGoToolchain(context.Background(), hp)
		if c.warning == "" {
			want := bind{Name: "tools.go", Source: c.goroot, Target: GoToolchainIn, ReadOnly: true}
			if len(hp.Binds) != 1 || hp.Binds[0] != want || len(hp.Path) != 1 || hp.Path[0] != "/airlock/go/bin" || len(hp.Warnings) > 0 {
				t.Errorf("%s: %+v", c.name, hp)
			}
			continue
		}
		if len(hp.Binds) != 0 || len(hp.Path) != 0 || len(hp.Warnings) != 1 || !strings.Contains(hp.Warnings[0], c.warning) || !strings.HasPrefix(hp.Warnings[0], "tools.go: ") {
			t.Errorf("%s: want no mount and a warning with %q, got %+v", c.name, c.warning, hp)
		}
	}
}
