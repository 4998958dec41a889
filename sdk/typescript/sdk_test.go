// Package typescript_test runs the TypeScript SDK's tests (sdk/typescript/test,
// `node --test`) in make test: it builds the SDK (npm ci of its dev
// dependencies and tsc, in a temporary copy), starts one control daemon of
// the airlock binary built here, in a hermetic home, listening on its Unix
// socket and on loopback TCP with a token, and runs the suite against it and
// the real Docker Engine with the busybox test image.
package typescript_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestMain builds airlock (or takes $AIRLOCK_BINARY) and checks that the
// tests write nothing into the package directory (no node_modules, no out/).
func TestMain(m *testing.M) { os.Exit(clitest.Main(m, "sdk-ts", "AIRLOCK_BINARY")) }

// suiteTimeout bounds the build and the node suite.
const suiteTimeout = 4 * time.Minute

// sources are what is copied to build the SDK and its tests.
var sources = []string{"package.json", "package-lock.json", "tsconfig.json", "tsconfig.test.json", "src", "test"}

// offline are the test files that need no daemon (the address table, the
// runtime directory's checks, the types against control/openapi.json): they
// run without an Engine too.
var offline = []string{"unit.test.js", "openapi.test.js"}

// TestTypeScriptSDK builds the SDK and runs `node --test` over its suite,
// failing with node's output: the offline files at once, the others against
// one daemon (which needs the Engine: without one they fail, unless
// AIRLOCK_SKIP_DOCKER=1).
func TestTypeScriptSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the TypeScript SDK's tests need Node.js 20 or later (node and npm on PATH): %v", err)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("the TypeScript SDK's tests need npm (it comes with Node.js): %v", err)
	}
	checkNodeVersion(t, node)
	src, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
	t.Cleanup(cancel)

	// The SDK and its tests, built in a copy of the sources while the daemon
	// starts and fills its pool.
	work := t.TempDir()
	built := make(chan error, 1)
	go func() { built <- build(ctx, t, npm, src, work) }()
	var once sync.Once
	var buildErr error
	awaitBuild := func(t *testing.T) {
		once.Do(func() { buildErr = <-built })
		if buildErr != nil {
			t.Fatal(buildErr)
		}
	}
	base := []string{"AIRLOCK_SDK_SOURCE=" + src, "AIRLOCK_SDK_BUILD=" + filepath.Join(work, "out")}
	compiled := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, filepath.Join(work, "out", "test", n))
		}
		return out
	}

	t.Run("offline", func(t *testing.T) {
		t.Parallel()
		awaitBuild(t)
		if err := runNode(ctx, t, node, work, compiled(offline...), base); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("daemon", func(t *testing.T) {
		t.Parallel()
		e := clitest.New(t, "") // fails (or skips) without an Engine
		token := randomHex(t)
		tokenFile := filepath.Join(e.Home, "token")
		if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		port := freePort(t)
		e.MustRun("daemon", "start", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--token-file", tokenFile)
		owner, err := control.OwnerKey(e.Paths())
		if err != nil {
			t.Fatal(err)
		}
		// Whatever happens, nothing of the daemon's sandboxes stays on the Engine.
		t.Cleanup(func() { testenv.ForceRemove(e.Cli, backend.LabelOwner, owner) })
		// The tests' sandboxes of the plain manifest come from a warm pool.
		if err := poolRequest(ctx, e.Socket(), "warm", map[string]any{"manifest_toml": testManifest(e.Image), "size": poolSize}); err != nil {
			t.Fatalf("cannot fill the tests' warm pool: %v", err)
		}
		awaitBuild(t)

		all, err := filepath.Glob(filepath.Join(work, "out", "test", "*.test.js"))
		if err != nil {
			t.Fatal(err)
		}
		tests := slices.DeleteFunc(all, func(p string) bool { return slices.Contains(offline, filepath.Base(p)) })
		if len(tests) == 0 {
			t.Fatalf("no compiled tests under %s", filepath.Join(work, "out", "test"))
		}
		daemonEnv, err := json.Marshal(e.Environ())
		if err != nil {
			t.Fatal(err)
		}
		env := append(base,
			"AIRLOCK_BINARY="+clitest.Bin,
			"AIRLOCK_TEST_IMAGE="+e.Image,
			"AIRLOCK_TEST_SOCKET="+e.Socket(),
			"AIRLOCK_TEST_RUNTIME_DIR="+e.Runtime,
			"AIRLOCK_TEST_TCP=tcp://127.0.0.1:"+strconv.Itoa(port),
			"AIRLOCK_TEST_TOKEN="+token,
			"AIRLOCK_TEST_PROJECT="+e.Project,
			"AIRLOCK_TEST_MANIFEST="+testManifest(e.Image),
			"AIRLOCK_TEST_DAEMON_ENV="+string(daemonEnv),
		)
		runErr := runNode(ctx, t, node, work, tests, env)
		if err := poolRequest(context.Background(), e.Socket(), "drain", map[string]any{"all": true}); err != nil {
			t.Error(err)
		}
		e.StopDaemon()
		if runErr == nil {
			lctx, lcancel := context.WithTimeout(context.Background(), time.Minute)
			left, err := testenv.Leftovers(lctx, e.Cli, backend.LabelOwner, owner)
			lcancel()
			if err != nil {
				t.Error(err)
			}
			left = slices.DeleteFunc(left, func(s string) bool { return strings.HasPrefix(s, "volume airlock-supervisor-") })
			if len(left) > 0 {
				t.Errorf("the TypeScript tests left %d Engine object(s):\n  %s", len(left), strings.Join(left, "\n  "))
			}
		}
		if runErr != nil {
			t.Fatal(runErr)
		}
	})
}

// build copies the SDK's sources to work, installs its dev dependencies there
// (npm ci, from npm's cache once fetched) and compiles the sources and the
// tests with tsc into work/out.
func build(ctx context.Context, t *testing.T, npm, src, work string) error {
	for _, s := range sources {
		from, to := filepath.Join(src, s), filepath.Join(work, s)
		if isFile(from) {
			b, err := os.ReadFile(from)
			if err != nil {
				return err
			}
			if err := os.WriteFile(to, b, 0o644); err != nil {
				return err
			}
		} else if err := os.CopyFS(to, os.DirFS(from)); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := command(ctx, work, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline",
		"--loglevel=error", "--cache", npmCache(work)); err != nil {
		return err
	}
	if err := command(ctx, work, filepath.Join(work, "node_modules", ".bin", "tsc"), "-p", "tsconfig.test.json",
		"--outDir", filepath.Join(work, "out")); err != nil {
		return err
	}
	t.Logf("npm ci and tsc: %v", time.Since(start).Round(time.Millisecond))
	return nil
}

// runNode runs `node --test` over files (the files at once), logging its
// output; an error when a test failed.
func runNode(ctx context.Context, t *testing.T, node, dir string, files, env []string) error {
	args := append([]string{"--test", "--test-concurrency=8", "--test-reporter=spec"}, files...)
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("node --test, %d files (%v):\n%s", len(files), time.Since(start).Round(time.Millisecond), out.String())
	if ctx.Err() != nil {
		return fmt.Errorf("the TypeScript SDK's tests did not end within %v", suiteTimeout)
	}
	if err != nil {
		return fmt.Errorf("node --test: %v (output above)", err)
	}
	return nil
}

// poolSize is how many sandboxes of the tests' manifest are parked for them.
const poolSize = 5

// testManifest is the manifest of most of the tests' sandboxes (helpers.ts
// takes it from AIRLOCK_TEST_MANIFEST): the busybox image, no network.
func testManifest(image string) string {
	return "[sandbox]\nimage = \"" + image + "\"\nnetwork = \"none\"\n"
}

// poolRequest POSTs /v1/pools/{verb} to the daemon on its socket.
func poolRequest(ctx context.Context, socket, verb string, body map[string]any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://airlockd/v1/pools/"+verb, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("cannot %s the pool: %w", verb, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cannot %s the pool: %s: %s", verb, resp.Status, answer)
	}
	return nil
}

// checkNodeVersion fails the test on a Node.js older than 20.
func checkNodeVersion(t *testing.T, node string) {
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _, _ := strings.Cut(v, ".")
	if n, err := strconv.Atoi(major); err != nil || n < 20 {
		t.Fatalf("the TypeScript SDK needs Node.js 20 or later, not %s", strings.TrimSpace(string(out)))
	}
}

// cleanEnv is the test's environment without the variables that pick a daemon.
func cleanEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "AIRLOCK_HOST" || k == "AIRLOCK_TOKEN" || k == "AIRLOCK_TLS_CA" || k == "NODE_OPTIONS"
	})
}

// npmCache is npm's cache: the user's (~/.npm), or one in the build's
// directory when there is no home.
func npmCache(work string) string {
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".npm")
	}
	return filepath.Join(work, ".npm-cache")
}

func command(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	cmd.WaitDelay = 10 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func randomHex(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// freePort is a TCP port on loopback nothing listens on now.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
