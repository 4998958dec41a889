//go:build faults

// Package faults is airlock's fault suite (issue 11, `make faults`): it injects
// faults into real runs against the Docker Engine — kill -9 of the CLI and of the
// control daemon at spread moments, concurrent runs, a long series of runs, bad
// inputs — asserts the outcome and records the figures in docs/reliability.md.
//
// It is behind the build tag faults, so `make test` does not run it; like every
// integration test of the repository it fails, not skips, without an Engine.
// AIRLOCK_FAULTS_BINARY=path tests that binary instead of building one;
// AIRLOCK_FAULTS_RUNS=N (default 1000) sets the length of the sequential series;
// AIRLOCK_FAULTS_RECORD=0 leaves docs/reliability.md alone.
package faults

import (
	"bytes"
	"context"
	"crypto/rand"
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
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/internal/benchdoc"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// labelProject is the label every object of a sandbox carries with its project dir.
const labelProject = "dev.airlock.project"

// cmdTimeout bounds one airlock invocation.
const cmdTimeout = 3 * time.Minute

// leftoverGrace is how long objects of a run may take to go (the issue: 10 s).
const leftoverGrace = 10 * time.Second

// reliabilityDoc is where the figures go, relative to this package.
const reliabilityDoc = "../docs/reliability.md"

var airlockBin string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "airlock-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if bin := os.Getenv("AIRLOCK_FAULTS_BINARY"); bin != "" {
		if airlockBin, err = filepath.Abs(bin); err != nil {
			fmt.Fprintln(os.Stderr, "faults:", err)
			return 1
		}
		return m.Run()
	}
	airlockBin = filepath.Join(dir, "airlock")
	if err := testenv.BuildAirlock(airlockBin, "faults-"+rand.Text()[:8]); err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	return m.Run()
}

// record writes one section of docs/reliability.md (unless AIRLOCK_FAULTS_RECORD=0)
// and prints its rows.
func record(t *testing.T, title, intro string, rows []benchdoc.Row, notes string) {
	t.Helper()
	for _, r := range rows {
		t.Logf("FIGURE %s | %s | %s | target %s", title, r.Measure, r.Result, r.Target)
	}
	if os.Getenv("AIRLOCK_FAULTS_RECORD") == "0" {
		return
	}
	verdict := "PASS"
	if t.Failed() {
		verdict = "FAIL"
	}
	intro = fmt.Sprintf("`%s`: **%s**. %s Machine: %s.", t.Name(), verdict, intro, benchdoc.Machine())
	if err := benchdoc.Write(reliabilityDoc, title, intro, rows, notes); err != nil {
		t.Errorf("cannot record the figures: %v", err)
	}
}

// env is one scenario's hermetic environment: its own HOME and XDG dirs (so its
// own control daemon) and a project.
type env struct {
	t       *testing.T
	cli     *client.Client
	image   string
	home    string
	config  string
	data    string
	runtime string
	project string
	extra   []string
}

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
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(e.project, 0o777); err != nil {
		t.Fatal(err)
	}
	if manifest != "" {
		e.writeManifest(manifest)
	}
	t.Cleanup(func() {
		e.stopControlDaemon()
		forceRemove(cli, e.project)
	})
	return e
}

// stopControlDaemon stops the control daemon this environment started.
func (e *env) stopControlDaemon() {
	if _, err := os.Stat(e.pidFile()); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := e.command(ctx, "daemon", "stop").CombinedOutput(); err != nil {
		e.t.Logf("airlock daemon stop: %v\n%s", err, out)
	}
}

func (e *env) pidFile() string { return filepath.Join(e.data, "airlock", "daemon", "airlockd.pid") }

func (e *env) socket() string { return filepath.Join(e.runtime, "airlock", "airlockd.sock") }

// daemonPID is the pid in the daemon's pid file, if that process lives.
func (e *env) daemonPID() (int, bool) {
	b, err := os.ReadFile(e.pidFile())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	if syscall.Kill(pid, 0) != nil {
		return pid, false
	}
	return pid, true
}

func (e *env) writeManifest(m string) {
	e.t.Helper()
	m = strings.ReplaceAll(m, "{{image}}", e.image)
	m = strings.ReplaceAll(m, "{{project}}", e.project)
	e.writeFile("sandbox.toml", m)
}

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

type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

func (e *env) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, airlockBin, args...)
	cmd.Dir = e.project
	cmd.Env = e.environ()
	cmd.Stdin = nil
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

func (e *env) run(args ...string) result { return e.runEnv(nil, args...) }

// runEnv runs airlock with args (and more environment variables) in the project dir.
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
	r := result{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		e.t.Fatalf("airlock %s: %v\n%s", strings.Join(args, " "), err, r)
	}
	if ctx.Err() != nil {
		e.t.Fatalf("airlock %s did not end within %v\n%s", strings.Join(args, " "), cmdTimeout, r)
	}
	return r
}

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
	stdout *testenv.SyncBuffer
	stderr *testenv.SyncBuffer
	done   chan struct{}
	err    error
	start  time.Time
}

func (e *env) start(args ...string) *proc {
	e.t.Helper()
	cmd := e.command(context.Background(), args...)
	p := &proc{cmd: cmd, stdout: &testenv.SyncBuffer{}, stderr: &testenv.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	p.start = time.Now()
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

// wait waits for the process to end; ok is false when it did not within timeout
// (it is killed then).
func (p *proc) wait(timeout time.Duration) (r result, ok bool) {
	ok = true
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		ok = false
	}
	r = result{stdout: p.stdout.String(), stderr: p.stderr.String(), took: time.Since(p.start)}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		r.code = ee.ExitCode()
	} else if p.err != nil {
		r.code = -1
	}
	return r, ok
}

// leftovers lists the Engine objects labelled with the project now.
func (e *env) leftovers() []string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	left, err := testenv.Leftovers(ctx, e.cli, labelProject, e.project)
	if err != nil {
		e.t.Fatal(err)
	}
	return left
}

// leftoversAfter polls until no object of the project is left or grace passed,
// and returns what is left and how long it took to go.
func (e *env) leftoversAfter(grace time.Duration) ([]string, time.Duration) {
	e.t.Helper()
	start := time.Now()
	for {
		left := e.leftovers()
		if len(left) == 0 || time.Since(start) > grace {
			return left, time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// psEntry is one object of `airlock ps --json`.
type psEntry struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Project string `json:"project"`
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

// containerStates lists the states of the project's containers.
func (e *env) containerStates() []string {
	list, err := e.cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", labelProject+"="+e.project))})
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	var out []string
	for _, c := range list {
		out = append(out, c.State)
	}
	return out
}

// forceRemove removes every container and network labelled with the project.
func forceRemove(cli *client.Client, project string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", labelProject+"="+project))
	if list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err == nil {
		for _, c := range list {
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}
	}
	if nets, err := cli.NetworkList(ctx, network.ListOptions{Filters: f}); err == nil {
		for _, n := range nets {
			_ = cli.NetworkRemove(ctx, n.ID)
		}
	}
	if vols, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f}); err == nil {
		for _, v := range vols.Volumes {
			_ = cli.VolumeRemove(ctx, v.Name, true)
		}
	}
}

// engineCounts counts every container, network and volume on the Engine.
func engineCounts(t *testing.T, cli *client.Client) (ctrs, nets, vols int) {
	t.Helper()
	ctx := context.Background()
	c, err := cli.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	n, err := cli.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := cli.VolumeList(ctx, volume.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(c), len(n), len(v.Volumes)
}

// procStats is what /proc says about a process.
type procStats struct {
	fds, threads int
	rssKB        int
}

func readProcStats(pid int) (procStats, error) {
	var s procStats
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.fds = len(fds)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.Atoi(f[0])
		switch k {
		case "Threads":
			s.threads = n
		case "VmRSS":
			s.rssKB = n
		}
	}
	return s, nil
}

// moments returns n offsets spread evenly over [0, span).
func moments(n int, span time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i) * span / time.Duration(n)
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// tally counts things by key, printed in key order of first appearance.
type tally struct {
	mu    sync.Mutex
	keys  []string
	count map[string]int
}

func (c *tally) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.count == nil {
		c.count = map[string]int{}
	}
	if _, ok := c.count[k]; !ok {
		c.keys = append(c.keys, k)
	}
	c.count[k]++
}

func (c *tally) String() string {
	var parts []string
	for _, k := range c.keys {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, c.count[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
