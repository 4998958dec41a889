package clitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	dockerclient "github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/paths"
	"github.com/airlock-dev/airlock/test/testenv"
)

// CmdTimeout bounds one airlock invocation of Run.
const CmdTimeout = 3 * time.Minute

// Dirs are the directories of a hermetic user: HOME and the XDG directories
// airlock places its files in.
type Dirs struct {
	Home, Config, Data, Runtime string
}

// Environ is the whole environment of an airlock process of that user: HOME,
// XDG_CONFIG_HOME, XDG_DATA_HOME, XDG_RUNTIME_DIR, PATH, NO_COLOR=1, and the
// test's DOCKER_HOST when it has one.
func (d Dirs) Environ() []string {
	out := []string{
		"HOME=" + d.Home,
		"XDG_CONFIG_HOME=" + d.Config,
		"XDG_DATA_HOME=" + d.Data,
		"XDG_RUNTIME_DIR=" + d.Runtime,
		"PATH=" + os.Getenv("PATH"),
		"NO_COLOR=1",
	}
	if h, ok := os.LookupEnv("DOCKER_HOST"); ok {
		out = append(out, "DOCKER_HOST="+h)
	}
	return out
}

// Getenv looks up HOME and the XDG variables of that user (for
// paths.FromEnv); every other variable is unset.
func (d Dirs) Getenv(k string) (string, bool) {
	switch k {
	case "HOME":
		return d.Home, true
	case "XDG_CONFIG_HOME":
		return d.Config, true
	case "XDG_DATA_HOME":
		return d.Data, true
	case "XDG_RUNTIME_DIR":
		return d.Runtime, true
	}
	return "", false
}

// Env is one test's hermetic environment: its own user directories (so its
// own control daemon) and a project directory.
type Env struct {
	T     *testing.T
	Cli   *dockerclient.Client // the Docker Engine
	Image string               // the busybox test image, {{image}} in manifests
	Dirs
	Project string
	Extra   []string // more K=V for every invocation
}

// New returns a fresh environment under t.TempDir() with a project dir
// holding a sandbox.toml made of manifest (none when it is empty), where
// {{image}} stands for the busybox test image and {{project}} for the project
// dir. When the test ends, the control daemon a command started is stopped
// and every Engine object labelled with the project is removed.
func New(t *testing.T, manifest string) *Env {
	t.Helper()
	e := &Env{T: t, Cli: testenv.Client(t), Image: testenv.BusyboxImage(t)}
	root := t.TempDir()
	e.Dirs = Dirs{Home: filepath.Join(root, "home"), Config: filepath.Join(root, "config"),
		Data: filepath.Join(root, "data"), Runtime: filepath.Join(root, "run")}
	e.Project = filepath.Join(root, "project")
	if err := e.makeDirs(); err != nil {
		t.Fatal(err)
	}
	// The sandbox user (nobody in some tests) reads the project dir.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(e.Project, 0o777); err != nil {
		t.Fatal(err)
	}
	if manifest != "" {
		e.WriteManifest(manifest)
	}
	t.Cleanup(func() {
		e.StopDaemon()
		testenv.ForceRemove(e.Cli, backend.LabelProject, e.Project)
	})
	return e
}

func (e *Env) makeDirs() error {
	for _, d := range []string{e.Home, e.Config, e.Data, e.Runtime, e.Project} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// warm is the outcome of Warm's one run.
var warm struct {
	once sync.Once
	err  error
}

// Warm fills the supervisor volume of Bin once per test binary, with a run of
// its own, so that tests started in parallel do not all wait on its first fill
// (the volume is keyed by the binary and shared by all). Main removes it.
func Warm(t *testing.T) {
	t.Helper()
	warm.once.Do(func() {
		dir := filepath.Join(tmpRoot, "warm")
		w := &Env{T: t, Cli: testenv.Client(t), Image: testenv.BusyboxImage(t), Project: filepath.Join(dir, "project"),
			Dirs: Dirs{Home: dir, Config: filepath.Join(dir, "config"), Data: filepath.Join(dir, "data"), Runtime: filepath.Join(dir, "run")}}
		if warm.err = w.makeDirs(); warm.err != nil {
			return
		}
		w.WriteManifest("[sandbox]\nimage = \"{{image}}\"\nnetwork = \"none\"\n")
		if r := w.Run("run", "--", "true"); r.Code != 0 {
			warm.err = fmt.Errorf("warm-up run failed: %s", r)
		}
		testenv.ForceRemove(w.Cli, backend.LabelProject, w.Project)
		w.StopDaemon()
	})
	if warm.err != nil {
		t.Fatal(warm.err)
	}
}

// WriteManifest writes the project's sandbox.toml, with {{image}} and
// {{project}} replaced.
func (e *Env) WriteManifest(m string) {
	e.T.Helper()
	m = strings.ReplaceAll(m, "{{image}}", e.Image)
	m = strings.ReplaceAll(m, "{{project}}", e.Project)
	e.WriteFile("sandbox.toml", m)
}

// WriteFile writes a file under the project dir, making its directories.
func (e *Env) WriteFile(rel, content string) {
	e.T.Helper()
	p := filepath.Join(e.Project, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.T.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.T.Fatal(err)
	}
}

// Environ is the environment of an invocation: the user's (Dirs.Environ),
// Extra, then extra.
func (e *Env) Environ(extra ...string) []string {
	out := append(e.Dirs.Environ(), e.Extra...)
	return append(out, extra...)
}

// Getenv looks a variable up in the environment of an invocation (Environ).
func (e *Env) Getenv(k string) (string, bool) {
	for _, kv := range e.Environ() {
		if n, v, _ := strings.Cut(kv, "="); n == k {
			return v, true
		}
	}
	return "", false
}

// Paths are the user's airlock paths.
func (e *Env) Paths() *paths.Paths {
	p, err := paths.FromEnv(e.Dirs.Getenv)
	if err != nil {
		e.T.Fatal(err)
	}
	return p
}

// Command returns an invocation of airlock with args in the project dir, with
// no standard input.
func (e *Env) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, Bin, args...)
	cmd.Dir = e.Project
	cmd.Env = e.Environ()
	cmd.Stdin = nil // /dev/null
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// Result is what one invocation gave.
type Result struct {
	Stdout, Stderr string
	Code           int           // the exit code; -1 when the process did not exit (a signal)
	Took           time.Duration // from its start to its end
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.Code, r.Stdout, r.Stderr)
}

// Run runs airlock with args in the project dir and returns its result.
func (e *Env) Run(args ...string) Result {
	e.T.Helper()
	return e.RunIn(e.Project, nil, args...)
}

// RunEnv is Run with more environment variables.
func (e *Env) RunEnv(extra []string, args ...string) Result {
	e.T.Helper()
	return e.RunIn(e.Project, extra, args...)
}

// RunIn is RunEnv in dir rather than the project dir.
func (e *Env) RunIn(dir string, extra []string, args ...string) Result {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CmdTimeout)
	defer cancel()
	cmd := e.Command(ctx, args...)
	cmd.Dir = dir
	cmd.Env = append(cmd.Env, extra...)
	r := RunCmd(e.T, cmd)
	if ctx.Err() != nil {
		e.T.Fatalf("airlock %s did not end within %v\n%s", strings.Join(args, " "), CmdTimeout, r)
	}
	return r
}

// RunCmd runs cmd, capturing its output, and returns its result. A command
// that cannot be run fails the test.
func RunCmd(t testing.TB, cmd *exec.Cmd) Result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String(), Took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		t.Fatalf("%s: %v (after %v)\n%s", commandLine(cmd), err, r.Took, r)
	}
	return r
}

// commandLine is "airlock ARGS…" for messages.
func commandLine(cmd *exec.Cmd) string {
	return strings.Join(append([]string{filepath.Base(cmd.Path)}, cmd.Args[1:]...), " ")
}

// MustRun runs airlock and fails the test unless it exits 0.
func (e *Env) MustRun(args ...string) Result {
	e.T.Helper()
	r := e.Run(args...)
	if r.Code != 0 {
		e.T.Fatalf("airlock %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// Proc is an airlock process running in the background.
type Proc struct {
	Cmd            *exec.Cmd
	Stdout, Stderr *testenv.SyncBuffer
	Done           chan struct{} // closed once it ended (Err is set then)
	Err            error
	Started        time.Time
}

// Start starts airlock with args in the background; it is killed if it still
// runs when the test ends.
func (e *Env) Start(args ...string) *Proc {
	e.T.Helper()
	return StartCmd(e.T, e.Command(context.Background(), args...))
}

// StartCmd starts cmd in the background, its output captured; it is killed if
// it still runs when the test ends.
func StartCmd(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, Stdout: &testenv.SyncBuffer{}, Stderr: &testenv.SyncBuffer{}, Done: make(chan struct{})}
	if cmd.Stdout == nil && cmd.Stderr == nil {
		cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
	}
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.Err = cmd.Wait()
		close(p.Done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.Done:
		default:
			_ = cmd.Process.Kill()
			<-p.Done
		}
	})
	return p
}

// Signal sends s to the process.
func (p *Proc) Signal(t testing.TB, s syscall.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(s); err != nil {
		t.Fatalf("cannot signal %s: %v", commandLine(p.Cmd), err)
	}
}

// Wait waits up to timeout for the process to end and returns its result; ok
// is false when it did not end in time (it is killed then).
func (p *Proc) Wait(timeout time.Duration) (r Result, ok bool) {
	ok = true
	select {
	case <-p.Done:
	case <-time.After(timeout):
		_ = p.Cmd.Process.Kill()
		<-p.Done
		ok = false
	}
	r = Result{Stdout: p.Stdout.String(), Stderr: p.Stderr.String(), Took: time.Since(p.Started)}
	var ee *exec.ExitError
	if errors.As(p.Err, &ee) {
		r.Code = ee.ExitCode()
	} else if p.Err != nil {
		r.Code = -1
	}
	return r, ok
}

// MustWait is Wait that fails the test when the process does not end within
// timeout.
func (p *Proc) MustWait(t testing.TB, timeout time.Duration) Result {
	t.Helper()
	r, ok := p.Wait(timeout)
	if !ok {
		t.Fatalf("%s did not end within %v\n%s", commandLine(p.Cmd), timeout, r)
	}
	return r
}

// PidFile is the control daemon's pid file of this user.
func (e *Env) PidFile() string { return filepath.Join(e.Paths().DaemonDir(), "airlockd.pid") }

// Socket is the control daemon's socket of this user.
func (e *Env) Socket() string { return e.Paths().Socket() }

// DaemonPID is the pid in the daemon's pid file; alive says whether that
// process lives.
func (e *Env) DaemonPID() (pid int, alive bool) {
	b, err := os.ReadFile(e.PidFile())
	if err != nil {
		return 0, false
	}
	pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, syscall.Kill(pid, 0) == nil
}

// StopDaemon stops the control daemon a command of this environment started
// (design.md §8), which would outlive the test otherwise.
func (e *Env) StopDaemon() {
	defer e.killStartingDaemons()
	if _, err := os.Stat(e.PidFile()); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := e.Command(ctx, "daemon", "stop").CombinedOutput(); err != nil {
		e.T.Logf("airlock daemon stop: %v\n%s", err, out)
	}
}

// killStartingDaemons kills the daemons of this environment that have no pid
// file yet: one a command started just before it was interrupted would
// outlive the test.
func (e *Env) killStartingDaemons() { e.KillDaemons() }

// StateDir is the per-sandbox state dir of a sandbox of this environment.
func (e *Env) StateDir(id string) string { return filepath.Join(e.Data, "airlock", "sandboxes", id) }

// StateDirs lists the per-sandbox state dirs there are.
func (e *Env) StateDirs() []string {
	entries, _ := os.ReadDir(filepath.Dir(e.StateDir("x")))
	var out []string
	for _, en := range entries {
		out = append(out, e.StateDir(en.Name()))
	}
	return out
}

// Containers lists the containers of the project (all states).
func (e *Env) Containers() []container.Summary {
	e.T.Helper()
	list, err := e.Cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", backend.LabelProject+"="+e.Project))})
	if err != nil {
		e.T.Fatal(err)
	}
	return list
}

// PSEntry is one object of `airlock ps --json`.
type PSEntry struct {
	ID        string            `json:"id"`
	State     string            `json:"state"`
	Project   string            `json:"project"`
	CreatedAt *time.Time        `json:"created_at"`
	Labels    map[string]string `json:"labels"`
	// MainExitCode is set while a run's daemons shut down after its main
	// command exited (a fast end).
	MainExitCode *int `json:"main_exit_code"`
	Daemons      *struct {
		Up    int `json:"up"`
		Total int `json:"total"`
	} `json:"daemons"`
}

// PS returns the `airlock ps -a --json` entries of this project.
func (e *Env) PS() []PSEntry {
	e.T.Helper()
	r := e.MustRun("ps", "-a", "--json")
	var all []PSEntry
	if err := json.Unmarshal([]byte(r.Stdout), &all); err != nil {
		e.T.Fatalf("ps --json: %v\n%s", err, r)
	}
	var out []PSEntry
	for _, p := range all {
		if p.Project == e.Project {
			out = append(out, p)
		}
	}
	return out
}

// WireManifest loads the project's sandbox.toml (its ${VAR}s from getenv) and
// returns it as the CLI sends it to the daemon, and the secret values the
// CLI sends apart.
func WireManifest(t testing.TB, projectDir string, getenv func(string) (string, bool)) (*client.Manifest, map[string]string) {
	t.Helper()
	l := &manifest.Loader{Getenv: getenv}
	r, err := l.Load(filepath.Join(projectDir, "sandbox.toml"))
	if err != nil {
		t.Fatalf("cannot load the manifest: %v", err)
	}
	w, values, err := r.ToWire()
	if err != nil {
		t.Fatal(err)
	}
	wm := client.Manifest(w)
	return &wm, values
}

// ForgeEndMarker is a main command (for sh -c) that prints, on stdout and
// stderr, the sealed end marker of its run with code 0 (the nonce read from
// the supervisor's command line, as any process of the sandbox may), then goes
// on and exits 4: a run must not believe it while the command still runs. It
// exits 9 when it finds no nonce.
const ForgeEndMarker = `n=$(tr '\0' '\n' < /proc/1/cmdline | grep -o '"end_marker":"[0-9a-f]*"' | cut -d'"' -f4)
[ -n "$n" ] || { echo no-nonce; exit 9; }
m=$(printf '\033_airlock-end:%s:0:sealed\033\\' "$n")
printf '%s' "$m"; printf '%s' "$m" >&2
sleep 2; exit 4`
