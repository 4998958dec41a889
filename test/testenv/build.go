package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildAirlock builds the static airlock binary (CGO_ENABLED=0, as it is injected
// into sandboxes) at out, with buildID as its build ID when not empty.
func BuildAirlock(out, buildID string) error { return goBuild(out, buildID) }

// BuildInSandbox builds, at out, the binary make injects into sandboxes and
// puts in the airlock image: static, of the in-sandbox commands alone (tag
// insandbox).
func BuildInSandbox(out string) error { return goBuild(out, "", "-tags", "insandbox") }

// goBuild runs go build of ./cmd/airlock, static, with more arguments.
func goBuild(out, buildID string, more ...string) error {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" {
		return fmt.Errorf("cannot find the module root: %v", err)
	}
	args := append([]string{"build", "-trimpath"}, more...)
	if buildID != "" {
		args = append(args, "-ldflags", "-X github.com/airlock-dev/airlock/cli.BuildID="+buildID)
	}
	cmd := exec.Command("go", append(args, "-o", out, "./cmd/airlock")...)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cannot build airlock: %v\n%s", err, b)
	}
	return nil
}
