package docker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/backend"
)

// GoToolchainIn is where the go tool mounts the host's Go installation (its
// GOROOT) inside the sandbox, read-only; its bin goes in front of PATH.
const GoToolchainIn = backend.AirlockIn + "/go"

// planGoToolchain adds the host's Go toolchain to the go tool's mounts: its
// GOROOT read-only at GoToolchainIn, and GoToolchainIn/bin in front of PATH, so
// an image without Go runs the host's. Only a toolchain that runs in the
// sandbox is mounted (a Linux go binary for the Engine's architecture);
// otherwise, or when the host has no Go, a warning says why and the image's go
// (if any) is used.
func (p *hostPlanner) planGoToolchain(ctx context.Context, hp *hostPlan) {
	goroot, err := p.hostGOROOT(ctx, hp)
	if err != nil {
		hp.Warnings = append(hp.Warnings, fmt.Sprintf("tools.go: the host's Go toolchain is not mounted: %v", err))
		return
	}
	arch, err := p.kind.arch(ctx)
	if err != nil {
		hp.Warnings = append(hp.Warnings, fmt.Sprintf("tools.go: the host's Go toolchain (%s) is not mounted: %v", goroot, err))
		return
	}
	if runtime.GOOS != "linux" {
		hp.Warnings = append(hp.Warnings, fmt.Sprintf("tools.go: the host's Go toolchain (%s) is not mounted: this host runs %s, the sandbox linux/%s (use an image with Go)", goroot, runtime.GOOS, arch))
		return
	}
	if err := CheckLinuxBinary(filepath.Join(goroot, "bin", "go"), arch, false); err != nil {
		hp.Warnings = append(hp.Warnings, fmt.Sprintf("tools.go: the host's Go toolchain is not mounted: %v", err))
		return
	}
	hp.Binds = append(hp.Binds, bind{Name: "tools.go", Source: goroot, Target: GoToolchainIn, ReadOnly: true})
	hp.Path = append(hp.Path, GoToolchainIn+"/bin")
}

// hostGOROOT finds the host's Go installation the way the go command finds its
// own: $GOROOT when set; else the go on the host's PATH, its symlinks
// resolved, two levels up, when that holds pkg/tool; else what `go env
// GOROOT` says (a go that is a wrapper script, as version managers install).
// The environment is the caller's (hp's tool environment), else the host's as
// the planner sees it (Getenv).
func (p *hostPlanner) hostGOROOT(ctx context.Context, hp *hostPlan) (string, error) {
	if g := hp.getenv(p, "GOROOT"); g != "" {
		if !isGOROOT(g) {
			return "", fmt.Errorf("GOROOT=%s holds no Go installation (no bin/go and pkg/tool)", g)
		}
		return filepath.Clean(g), nil
	}
	exe, err := lookPathIn("go", hp.getenv(p, "PATH"))
	if err != nil {
		return "", fmt.Errorf("no go on this host's PATH, and GOROOT is not set")
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		if g := filepath.Dir(filepath.Dir(real)); isGOROOT(g) {
			return g, nil
		}
	}
	if g := filepath.Dir(filepath.Dir(exe)); isGOROOT(g) {
		return g, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "env", "GOROOT")
	// Never a toolchain download, never a go.mod of the daemon's directory.
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + hp.getenv(p, "PATH"), "HOME=" + p.env("HOME"), "GOTOOLCHAIN=local", "GOFLAGS="}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s env GOROOT: %v", exe, err)
	}
	g := strings.TrimSpace(string(out))
	if !isGOROOT(g) {
		return "", fmt.Errorf("%s env GOROOT gives %q, which holds no Go installation", exe, g)
	}
	return g, nil
}

// isGOROOT reports whether dir is a Go installation: bin/go and pkg/tool.
func isGOROOT(dir string) bool {
	if !filepath.IsAbs(dir) {
		return false
	}
	if st, err := os.Stat(filepath.Join(dir, "bin", "go")); err != nil || st.IsDir() {
		return false
	}
	st, err := os.Stat(filepath.Join(dir, "pkg", "tool"))
	return err == nil && st.IsDir()
}

// lookPathIn finds an executable file named name in the directories of path
// (a PATH value), as exec.LookPath does with the process's own PATH.
func lookPathIn(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}
