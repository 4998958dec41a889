// Package e2e holds airlock's end-to-end tests: they build the static binary once
// and drive it as a subprocess against the real Docker Engine, each test with its
// own project directory and its own XDG directories (the harness is
// test/clitest, shared with the fault suite).
//
// Like every integration test of the repository, they fail when no Engine
// answers, unless AIRLOCK_SKIP_DOCKER=1. AIRLOCK_E2E_BINARY=path tests that
// binary instead of building one.
package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	dockerclient "github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

// labelProject is the label every object of a sandbox carries with its project dir.
const labelProject = backend.LabelProject

// cmdTimeout bounds one airlock invocation.
const cmdTimeout = clitest.CmdTimeout

// parallel limits how many tests drive sandboxes at once: most of a test's
// time is spent waiting on the Engine, not on the 2 cores
// (AIRLOCK_E2E_PARALLEL overrides the default).
var parallel = make(chan struct{}, testenv.Parallelism("AIRLOCK_E2E_PARALLEL", 4))

// sharedRemote is the stand-in remote Engine the package's tests share (TestMain
// stops it): each test's objects carry its own project label, which is what
// newRemoteEnv checks the Engine for.
var sharedRemote testenv.SharedRemoteEngine

func TestMain(m *testing.M) {
	testenv.LiftParallelFlag(cap(parallel))
	code := clitest.Main(m, "e2e", "AIRLOCK_E2E_BINARY")
	if err := sharedRemote.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	os.Exit(code)
}

// env is one test's hermetic environment (clitest.Env).
type env struct{ *clitest.Env }

type (
	result = clitest.Result
	proc   = clitest.Proc
)

// newEnv returns a fresh environment with a project dir holding sandbox.toml made
// from manifest, where {{image}} stands for the busybox test image. When the test
// ends it checks that nothing labelled with the project is left (and removes what is).
func newEnv(t *testing.T, manifest string) *env {
	t.Helper()
	clitest.Warm(t)
	e := &env{clitest.New(t, manifest)}
	t.Cleanup(func() { testenv.AssertNoLeftovers(t, e.Cli, labelProject, e.Project) })
	return e
}

// limit runs the rest of the test with at most cap(parallel) others.
func limit(t *testing.T) {
	t.Parallel()
	parallel <- struct{}{}
	t.Cleanup(func() { <-parallel })
}

// eventually polls cond until it holds or the deadline passes.
var eventually = testenv.Eventually

// assertNoStateDirs fails unless no per-sandbox state dir remains.
func (e *env) assertNoStateDirs() {
	e.T.Helper()
	for _, d := range e.StateDirs() {
		e.T.Errorf("state dir %s remains", d)
	}
}

// assertClean checks that nothing of the project is left: no Engine object and no state dir.
func (e *env) assertClean() {
	e.T.Helper()
	testenv.AssertNoLeftovers(e.T, e.Cli, labelProject, e.Project)
	e.assertNoStateDirs()
}

// startFails runs `run -- echo main-ran` and fails the test unless the start
// fails with 125 before the main command, within limit, with every want in
// stderr, and leaves nothing behind.
func (e *env) startFails(limit time.Duration, wants ...string) result {
	e.T.Helper()
	r := e.Run("run", "--", "echo", "main-ran")
	if r.Code != 125 || strings.Contains(r.Stdout, "main-ran") {
		e.T.Errorf("want exit 125 without the main command, got %s", r)
	}
	contains(e.T, "stderr", r.Stderr, wants...)
	if r.Took > limit {
		e.T.Errorf("the start failed after %v; want under %v", r.Took, limit)
	}
	e.assertClean()
	return r
}

// runningContainer reports whether a container of the project with role is running.
func (e *env) runningContainer(role string) bool {
	for _, c := range e.Containers() {
		if c.Labels["dev.airlock.role"] == role && c.State == "running" {
			return true
		}
	}
	return false
}

// uniq returns s with a random suffix, for names other test runs on this Engine must not share.
func uniq(s string) string { return s + "-" + strings.ToLower(rand.Text()[:8]) }

// podmanEngine reports whether the tests' Engine is Podman's Docker-compatible
// service (scripts/podman.sh): its version lists a "Podman Engine" component.
func podmanEngine(t *testing.T, cli dockerclient.APIClient) bool {
	t.Helper()
	v, err := cli.ServerVersion(context.Background())
	if err != nil {
		t.Fatalf("cannot ask the Engine for its version: %v", err)
	}
	for _, c := range v.Components {
		if c.Name == "Podman Engine" {
			return true
		}
	}
	return false
}

// skipOnPodman skips a test of what airlock does not do on Podman, saying why.
func skipOnPodman(t *testing.T, why string) {
	t.Helper()
	if podmanEngine(t, testenv.Client(t)) {
		t.Skip("Podman: " + why)
	}
}

// contains fails the test unless s contains every sub.
func contains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not contain %q:\n%s", what, sub, s)
		}
	}
}
