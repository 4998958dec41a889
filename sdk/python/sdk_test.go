//go:build sdk

// Package python_test runs the Python SDK's tests (sdk/python/tests) in
// `make test-sdk` (build tag sdk; CI runs it after make test): against a control daemon they start from the airlock binary
// built here and the real Docker Engine, with the busybox test image.
package python_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control"
	"github.com/airlock-dev/airlock/paths"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
	"github.com/docker/docker/client"
)

// TestMain builds airlock (or takes $AIRLOCK_BINARY) and checks that the
// tests write nothing into the package directory (no __pycache__).
func TestMain(m *testing.M) { os.Exit(clitest.Main(m, "sdk-python", "AIRLOCK_BINARY")) }

// pythonTimeout bounds the whole Python suite: a guard against a hang, under
// go test's own 10 minutes. The suite waits on the Engine most of its time,
// and took from 90 s to 280 s on one quiet 2-core machine, as fast as that
// machine's Engine was on the day (a `docker run --rm` of 0.3 s to 1.6 s);
// under load, more.
const pythonTimeout = 8 * time.Minute

// TestPythonSDK runs `python3 -m unittest discover -s sdk/python/tests -v`,
// failing on a non-zero exit. Without python3 it fails, unless
// AIRLOCK_SKIP_DOCKER=1 (as every integration test does without an Engine).
func TestPythonSDK(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv(testenv.SkipDockerEnv) == "1" {
			t.Skipf("%s=1 and no python3: %v", testenv.SkipDockerEnv, err)
		}
		t.Fatalf("the Python SDK's tests need python3 (./scripts/engine.sh installs it): %v", err)
	}
	cli := testenv.Client(t) // fails (or skips) without an Engine
	image := testenv.BusyboxImage(t)
	state := t.TempDir() // the daemon's HOME and XDG dirs
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), pythonTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "discover", "-s", "tests", "-t", "tests", "-v")
	cmd.Dir = "." // sdk/python
	cmd.Env = append(os.Environ(),
		"AIRLOCK_BINARY="+clitest.Bin,
		"AIRLOCK_TEST_IMAGE="+image,
		"AIRLOCK_TEST_STATE_DIR="+state,
		"PYTHONDONTWRITEBYTECODE=1",
		"PYTHONUNBUFFERED=1",
	)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	runErr := cmd.Run()
	t.Logf("python3 -m unittest (%v):\n%s", time.Since(start).Round(time.Millisecond), out.String())

	// Whatever happened, nothing the tests' daemons made may stay on the Engine
	// (the TLS daemon of TLSTest has its state under tls/).
	for _, root := range []string{state, filepath.Join(state, "tls")} {
		checkLeftovers(t, cli, root, runErr == nil)
	}

	if ctx.Err() != nil {
		t.Fatalf("the Python tests did not end within %v", pythonTimeout)
	}
	if runErr != nil {
		t.Fatalf("python3 -m unittest: %v (output above)", runErr)
	}
	if !strings.Contains(out.String(), "\nOK") {
		t.Fatalf("python3 -m unittest did not say OK (output above)")
	}
}

// TestPythonSDKTypes checks the package's type hints with `mypy --strict`
// (Debian's mypy, which ./scripts/engine.sh installs); skipped without it.
func TestPythonSDKTypes(t *testing.T) {
	mypy, err := exec.LookPath("mypy")
	if err != nil {
		t.Skipf("no mypy (./scripts/engine.sh installs it): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mypy, "--strict", "--no-incremental", "--cache-dir", t.TempDir(), "airlock")
	cmd.Dir = "." // sdk/python
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mypy --strict airlock: %v\n%s", err, out)
	}
	t.Logf("mypy --strict airlock: %s", bytes.TrimSpace(out))
}

// checkLeftovers fails the test when a sandbox of the daemon whose HOME and
// XDG directories are under root left anything on the Engine (checked when
// the suite passed: a failure may leave its sandbox), and removes it.
func checkLeftovers(t *testing.T, cli client.APIClient, root string, check bool) {
	t.Helper()
	p, err := paths.FromEnv(func(k string) (string, bool) {
		switch k {
		case "HOME":
			return filepath.Join(root, "home"), true
		case "XDG_DATA_HOME":
			return filepath.Join(root, "data"), true
		case "XDG_CONFIG_HOME":
			return filepath.Join(root, "config"), true
		case "XDG_RUNTIME_DIR":
			return filepath.Join(root, "run"), true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p.DaemonDir(), "owner-key")); err != nil {
		return
	}
	owner, err := control.OwnerKey(p)
	if err != nil {
		t.Fatal(err)
	}
	if check {
		// The tests waited for each deletion; the supervisor volume is
		// shared by the sandboxes of the binary and removed by TestMain.
		lctx, lcancel := context.WithTimeout(context.Background(), time.Minute)
		left, err := testenv.Leftovers(lctx, cli, backend.LabelOwner, owner)
		lcancel()
		if err != nil {
			t.Error(err)
		}
		left = slices.DeleteFunc(left, func(s string) bool { return strings.HasPrefix(s, "volume airlock-supervisor-") })
		if len(left) > 0 {
			t.Errorf("the Python tests left %d Engine object(s) of their daemon (%s):\n  %s", len(left), root, strings.Join(left, "\n  "))
		}
	}
	testenv.ForceRemove(cli, backend.LabelOwner, owner)
}
