// Package e2e holds airlock's end-to-end tests: they build the static binary once
// and drive it as a subprocess against the real Docker Engine, each test with its
// own project directory and its own XDG directories.
//
// Like every integration test of the repository, they fail when no Engine
// answers, unless AIRLOCK_SKIP_DOCKER=1. AIRLOCK_E2E_BINARY=path tests that
// binary instead of building one.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// labelProject is the label every object of a sandbox carries with its project dir.
const labelProject = "dev.airlock.project"

// cmdTimeout bounds one airlock invocation.
const cmdTimeout = 3 * time.Minute

// airlockBin is the static binary built by TestMain.
var airlockBin string

// warm is the warm-up run's home (see seedSupervisor).
var warm struct {
	once sync.Once
	dir  string
	err  error
}

// tmpRoot holds the binary and the shared warm-up data dir.
var tmpRoot string

// parallel limits how many tests drive sandboxes at once (2 cores).
var parallel = make(chan struct{}, 3)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "airlock-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	tmpRoot = dir
	if bin := os.Getenv("AIRLOCK_E2E_BINARY"); bin != "" {
		// A binary built elsewhere (e.g. bin/airlock of make build).
		if airlockBin, err = filepath.Abs(bin); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		return m.Run()
	}
	airlockBin = filepath.Join(dir, "airlock")
	if err := testenv.BuildAirlock(airlockBin, "e2e-"+rand.Text()[:8]); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}

// env is one test's hermetic environment: its own HOME and XDG dirs, and a project.
type env struct {
	t       *testing.T
	cli     *client.Client
	image   string
	home    string
	config  string
	data    string
	runtime string
	project string
	extra   []string // more K=V for every invocation
}

// newEnv returns a fresh environment with a project dir holding sandbox.toml made
// from manifest, where {{image}} stands for the busybox test image. When the test
// ends it checks that nothing labelled with the project is left (and removes what is).
func newEnv(t *testing.T, manifest string) *env {
	t.Helper()
	cli := testenv.Client(t)
	e := &env{t: t, cli: cli, image: testenv.BusyboxImage(t)}
	root := t.TempDir()
	e.home = filepath.Join(root, "home")
	e.config = filepath.Join(root, "config")
	e.data = filepath.Join(root, "data")
	e.runtime = filepath.Join(root, "run")
	e.project = filepath.Join(root, "project")
	for _, d := range []string{e.home, e.config, e.data, e.runtime, e.project} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The sandbox user (nobody in some tests) reads the project dir.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(e.project, 0o777); err != nil {
		t.Fatal(err)
	}
	e.seedSupervisor()
	if manifest != "" {
		e.writeManifest(manifest)
	}
	t.Cleanup(func() {
		testenv.AssertNoLeftovers(t, cli, labelProject, e.project)
		forceRemove(cli, e.project)
		e.stopControlDaemon()
	})
	return e
}

// stopControlDaemon stops the control daemon a command of this environment
// started (DESIGN §8), which would outlive the test otherwise.
func (e *env) stopControlDaemon() {
	if _, err := os.Stat(filepath.Join(e.data, "airlock", "daemon", "airlockd.pid")); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := e.command(ctx, "daemon", "stop")
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Logf("airlock daemon stop: %v\n%s", err, out)
	}
}

// limit runs the rest of the test with at most cap(parallel) others.
func limit(t *testing.T) {
	t.Parallel()
	parallel <- struct{}{}
	t.Cleanup(func() { <-parallel })
}

func (e *env) writeManifest(m string) {
	e.t.Helper()
	m = strings.ReplaceAll(m, "{{image}}", e.image)
	m = strings.ReplaceAll(m, "{{project}}", e.project)
	e.writeFile("sandbox.toml", m)
}

// writeFile writes a file under the project dir.
func (e *env) writeFile(rel, content string) {
	e.t.Helper()
	p := filepath.Join(e.project, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// seedSupervisor fills the supervisor volume once, with a warm-up run, before the
// tests run in parallel (the volume is keyed by the binary and shared by all).
func (e *env) seedSupervisor() {
	e.t.Helper()
	warm.once.Do(func() {
		warm.dir = filepath.Join(tmpRoot, "warm")
		w := &env{t: e.t, cli: e.cli, image: e.image, home: warm.dir, config: warm.dir + "/config", data: warm.dir + "/data", runtime: warm.dir + "/run", project: warm.dir + "/project"}
		for _, d := range []string{w.home, w.config, w.data, w.runtime, w.project} {
			if warm.err = os.MkdirAll(d, 0o700); warm.err != nil {
				return
			}
		}
		if warm.err = os.WriteFile(filepath.Join(w.project, "sandbox.toml"), []byte("[sandbox]\nimage = \""+e.image+"\"\nnetwork = \"none\"\n"), 0o644); warm.err != nil {
			return
		}
		r := w.run("run", "--", "true")
		if r.code != 0 {
			warm.err = fmt.Errorf("warm-up run failed: %s", r)
		}
		forceRemove(e.cli, w.project)
		w.stopControlDaemon()
	})
	if warm.err != nil {
		e.t.Fatal(warm.err)
	}
}

// environ is the hermetic environment of an invocation.
func (e *env) environ(extra ...string) []string {
	out := []string{
		"HOME=" + e.home,
		"XDG_CONFIG_HOME=" + e.config,
		"XDG_DATA_HOME=" + e.data,
		"XDG_RUNTIME_DIR=" + e.runtime,
		"PATH=" + os.Getenv("PATH"),
		"NO_COLOR=1",
	}
	if h, ok := os.LookupEnv("DOCKER_HOST"); ok {
		out = append(out, "DOCKER_HOST="+h)
	}
	out = append(out, e.extra...)
	return append(out, extra...)
}

// result is what one invocation gave.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// command returns an invocation of airlock in the project dir.
func (e *env) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, airlockBin, args...)
	cmd.Dir = e.project
	cmd.Env = e.environ()
	cmd.Stdin = nil // /dev/null
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// run runs airlock with args in the project dir and returns its result.
func (e *env) run(args ...string) result {
	return e.runEnv(nil, args...)
}

// runEnv is run with more environment variables.
func (e *env) runEnv(extra []string, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := e.command(ctx, args...)
	cmd.Env = append(cmd.Env, extra...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		e.t.Fatalf("airlock %s: %v (after %v)\n%s", strings.Join(args, " "), err, time.Since(start), r)
	}
	if ctx.Err() != nil {
		e.t.Fatalf("airlock %s did not end within %v\n%s", strings.Join(args, " "), cmdTimeout, r)
	}
	return r
}

// mustRun runs airlock and fails the test unless it exits 0.
func (e *env) mustRun(args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("airlock %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// proc is an airlock process running in the background.
type proc struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

// start starts airlock in the background; the test kills it if it still runs at the end.
func (e *env) start(args ...string) *proc {
	e.t.Helper()
	cmd := e.command(context.Background(), args...)
	p := &proc{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	e.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *proc) signal(t *testing.T, s syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(s); err != nil {
		t.Fatalf("cannot signal airlock: %v", err)
	}
}

// wait waits for the process to end and returns its result.
func (p *proc) wait(t *testing.T, timeout time.Duration) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("airlock %s did not end within %v\n--- stdout:\n%s--- stderr:\n%s", strings.Join(p.cmd.Args[1:], " "), timeout, p.stdout, p.stderr)
	}
	r := result{stdout: p.stdout.String(), stderr: p.stderr.String()}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		r.code = ee.ExitCode()
	} else if p.err != nil {
		t.Fatalf("airlock: %v", p.err)
	}
	return r
}

type syncBuffer = testenv.SyncBuffer

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stateDir is the per-sandbox state dir of a sandbox of this environment.
func (e *env) stateDir(id string) string {
	return filepath.Join(e.data, "airlock", "sandboxes", id)
}

// assertNoStateDirs fails unless no per-sandbox state dir remains.
func (e *env) assertNoStateDirs() {
	e.t.Helper()
	entries, err := os.ReadDir(filepath.Join(e.data, "airlock", "sandboxes"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		e.t.Fatal(err)
	}
	for _, en := range entries {
		e.t.Errorf("state dir %s remains", filepath.Join(e.data, "airlock", "sandboxes", en.Name()))
	}
}

// assertClean checks that nothing of the project is left: no Engine object and no state dir.
func (e *env) assertClean() {
	e.t.Helper()
	testenv.AssertNoLeftovers(e.t, e.cli, labelProject, e.project)
	e.assertNoStateDirs()
}

// containers lists the containers of the project (all states).
func (e *env) containers() []container.Summary {
	e.t.Helper()
	list, err := e.cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", labelProject+"="+e.project))})
	if err != nil {
		e.t.Fatal(err)
	}
	return list
}

// runningContainer reports whether a container of the project with role is running.
func (e *env) runningContainer(role string) bool {
	for _, c := range e.containers() {
		if c.Labels["dev.airlock.role"] == role && c.State == "running" {
			return true
		}
	}
	return false
}

// psEntry is one object of `airlock ps --json`.
type psEntry struct {
	ID        string            `json:"id"`
	State     string            `json:"state"`
	Project   string            `json:"project"`
	CreatedAt *time.Time        `json:"created_at"`
	Labels    map[string]string `json:"labels"`
	Daemons   *struct {
		Up    int `json:"up"`
		Total int `json:"total"`
	} `json:"daemons"`
}

// ps returns `airlock ps -a --json` entries of this project.
func (e *env) ps() []psEntry {
	e.t.Helper()
	r := e.mustRun("ps", "-a", "--json")
	var all []psEntry
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil {
		e.t.Fatalf("ps --json: %v\n%s", err, r)
	}
	var out []psEntry
	for _, p := range all {
		if p.Project == e.project {
			out = append(out, p)
		}
	}
	return out
}

// uniq returns s with a random suffix, for names other test runs on this Engine must not share.
func uniq(s string) string { return s + "-" + strings.ToLower(rand.Text()[:8]) }

// forceRemove removes every container and network labelled with the project.
func forceRemove(cli *client.Client, project string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", labelProject+"="+project))
	if list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err == nil {
		for _, c := range list {
			err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
			_ = err
		}
	}
	if nets, err := cli.NetworkList(ctx, network.ListOptions{Filters: f}); err == nil {
		for _, n := range nets {
			if err := cli.NetworkRemove(ctx, n.ID); err != nil && !cerrdefs.IsNotFound(err) {
				_ = err
			}
		}
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
