// Package clitest runs the airlock binary in tests as a user does: Main, the
// TestMain of a suite, builds the binary once; each test gets a hermetic Env
// (its own HOME, XDG dirs and project dir) and runs the binary in it (Run,
// MustRun, Start). It is the harness of the e2e and faults suites; the control
// tests use its pieces (Build, Dirs).
//
// Like every integration test of the repository, a test fails when no Docker
// Engine answers, unless AIRLOCK_SKIP_DOCKER=1.
package clitest

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/test/testenv"
)

// Bin is the airlock binary under test, set by Main.
var Bin string

// tmpRoot is Main's temporary directory: the binary and the warm-up's home.
var tmpRoot string

// Main is the TestMain of a suite named name ("e2e", "faults"): it builds the
// static airlock binary, or takes the one the variable binaryEnv names (e.g.
// bin/airlock of make build), runs the tests with testenv.RunClean (they must
// not write into the package directory), and removes the supervisor volume
// the binary it built made on the Engine, so that a run leaves nothing behind.
// It returns the exit code.
func Main(m *testing.M, name, binaryEnv string) int { return MainWith(m, name, binaryEnv, nil) }

// MainWith is Main with setup run once Bin is there, before the tests (a failure
// fails the run).
func MainWith(m *testing.M, name, binaryEnv string, setup func() error) int {
	dir, err := os.MkdirTemp("", "airlock-"+name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 1
	}
	defer os.RemoveAll(dir)
	tmpRoot = dir
	if bin := os.Getenv(binaryEnv); bin != "" {
		if Bin, err = filepath.Abs(bin); err != nil {
			fmt.Fprintln(os.Stderr, name+":", err)
			return 1
		}
		return runWith(m, name, setup)
	}
	b, err := Build(filepath.Join(dir, "airlock"), name)
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 1
	}
	Bin = b.Path
	defer b.RemoveSupervisorVolume()
	return runWith(m, name, setup)
}

func runWith(m *testing.M, name string, setup func() error) int {
	if setup != nil {
		if err := setup(); err != nil {
			fmt.Fprintln(os.Stderr, name+":", err)
			return 1
		}
	}
	return testenv.RunClean(m)
}

// Binary is an airlock binary built for a test run.
type Binary struct {
	Path    string
	BuildID string
}

// Build builds the static airlock binary at path, with the build ID prefix-<8
// random characters>: a build of its own, so its own supervisor volume, and a
// daemon of another build is replaced rather than used.
func Build(path, prefix string) (Binary, error) {
	b := Binary{Path: path, BuildID: prefix + "-" + strings.ToLower(rand.Text()[:8])}
	return b, testenv.BuildAirlock(b.Path, b.BuildID)
}

// Copy writes a copy of b at path whose build ID is prefix-<8 random
// characters> (prefix as long as b's, so the new ID is as long as the old):
// the same code and another build to a daemon, which replaces a daemon of
// another build, without linking a second binary (about 5 s of CPU). Every
// occurrence of b's build ID in the binary is replaced: the string the linker
// set, and the -ldflags the build info records.
func (b Binary) Copy(path, prefix string) (Binary, error) {
	c := Binary{Path: path, BuildID: prefix + "-" + strings.ToLower(rand.Text()[:8])}
	if len(c.BuildID) != len(b.BuildID) {
		return c, fmt.Errorf("cannot copy build %s as %s: the build IDs differ in length", b.BuildID, c.BuildID)
	}
	data, err := os.ReadFile(b.Path)
	if err != nil {
		return c, err
	}
	n := bytes.Count(data, []byte(b.BuildID))
	if n == 0 {
		return c, fmt.Errorf("cannot copy build %s: %s does not hold its build ID", b.BuildID, b.Path)
	}
	data = bytes.ReplaceAll(data, []byte(b.BuildID), []byte(c.BuildID))
	return c, os.WriteFile(path, data, 0o755)
}

// RemoveSupervisorVolume removes the supervisor volume (and its -ok
// companion) that sandboxes made by b use on the Engine: b is a build without
// embedded supervisors, which injects its own executable, so the volume's name
// derives from the binary. Best effort: a volume a leftover container still
// uses stays.
func (b Binary) RemoveSupervisorVolume() {
	testenv.RemoveSupervisorVolume(func(machine string) (string, error) {
		arch := docker.GoArch(machine)
		sup, err := docker.SupervisorFile(b.Path, arch, b.BuildID, false)
		if err != nil {
			return "", err
		}
		return docker.SupervisorVolumeName(sup, arch), nil
	})
}
