// Integration tests of the control daemon: they build the static airlock binary
// once, run `airlock daemon run` as a subprocess with hermetic XDG dirs and
// drive it through the public Go client against a real Docker Engine.
//
// Like every integration test of the repository, they fail when no Engine
// answers, unless AIRLOCK_SKIP_DOCKER=1.
package control_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	dockerclient "github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control"
	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/paths"
	"github.com/airlock-dev/airlock/sandbox"
)

const labelProject = "dev.airlock.project"

// Two builds of the same source: A is the daemon under test, B plays a newer CLI.
var (
	binA, binB     string
	buildA, buildB string
	tmpRoot        string
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "airlock-control-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "control tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	tmpRoot = dir
	suffix := strings.ToLower(rand.Text()[:8])
	buildA, buildB = "ctla-"+suffix, "ctlb-"+suffix
	binA, binB = filepath.Join(dir, "airlock-a"), filepath.Join(dir, "airlock-b")
	for _, b := range []struct{ bin, id string }{{binA, buildA}, {binB, buildB}} {
		if err := testenv.BuildAirlock(b.bin, b.id); err != nil {
			fmt.Fprintln(os.Stderr, "control tests:", err)
			return 1
		}
	}
	code := m.Run()
	removeSupervisorVolumes()
	return code
}

// removeSupervisorVolumes removes the supervisor volumes of the test binaries
// (best effort: one still in use by a leftover stays). The daemons inject
// their own executable (a build without embedded supervisors, for this host's
// architecture), so the names derive from the binaries.
func removeSupervisorVolumes() {
	cli, err := testenv.NewClient(context.Background())
	if err != nil {
		return
	}
	defer cli.Close()
	for _, b := range []struct{ bin, id string }{{binA, buildA}, {binB, buildB}} {
		sup, err := sandbox.SupervisorFile(b.bin, runtime.GOARCH, b.id, false)
		if err != nil {
			continue
		}
		name := sandbox.SupervisorVolumeName(sup, runtime.GOARCH)
		_ = cli.VolumeRemove(context.Background(), name, false)
		_ = cli.VolumeRemove(context.Background(), name+"-ok", false)
	}
}

// env is one test's hermetic environment: HOME, XDG dirs and a project dir.
type env struct {
	t       *testing.T
	docker  *dockerclient.Client
	image   string
	home    string
	config  string
	data    string
	runtime string
	project string
	paths   *paths.Paths
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, docker: testenv.Client(t), image: testenv.BusyboxImage(t)}
	root := t.TempDir()
	e.home = filepath.Join(root, "home")
	e.config = filepath.Join(root, "config")
	e.data = filepath.Join(root, "data")
	e.project = filepath.Join(root, "project")
	for _, d := range []string{e.home, e.config, e.data, e.project} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// A short runtime dir: the socket path must stay < 108 bytes.
	rt, err := os.MkdirTemp("", "al")
	if err != nil {
		t.Fatal(err)
	}
	e.runtime = rt
	t.Cleanup(func() { os.RemoveAll(rt) })
	p, err := paths.FromEnv(e.getenv)
	if err != nil {
		t.Fatal(err)
	}
	e.paths = p
	e.writeManifest(upManifest)
	t.Cleanup(func() { forceRemove(e.docker, e.project) })
	return e
}

func (e *env) getenv(k string) (string, bool) {
	switch k {
	case "HOME":
		return e.home, true
	case "XDG_CONFIG_HOME":
		return e.config, true
	case "XDG_DATA_HOME":
		return e.data, true
	case "XDG_RUNTIME_DIR":
		return e.runtime, true
	}
	return "", false
}

func (e *env) environ() []string {
	out := []string{"HOME=" + e.home, "XDG_CONFIG_HOME=" + e.config, "XDG_DATA_HOME=" + e.data,
		"XDG_RUNTIME_DIR=" + e.runtime, "PATH=" + os.Getenv("PATH"), "NO_COLOR=1"}
	if h, ok := os.LookupEnv("DOCKER_HOST"); ok {
		out = append(out, "DOCKER_HOST="+h)
	}
	return out
}

// upManifest is a sandbox with one daemon that has a readiness check.
const upManifest = `
[sandbox]
image = "{{image}}"
network = "none"

[daemons.idle]
command = ["sh", "-c", "echo idle-up; exec sleep 300"]
timeout = 1
ready = { log = "idle-up", timeout = "20s" }
`

func (e *env) writeManifest(m string) {
	e.t.Helper()
	m = strings.ReplaceAll(m, "{{image}}", e.image)
	if err := os.WriteFile(filepath.Join(e.project, "sandbox.toml"), []byte(m), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) writeUserConfig(s string) {
	e.t.Helper()
	dir := filepath.Join(e.config, "airlock")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(s), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// wire loads the project's sandbox.toml and returns it as the CLI sends it.
func (e *env) wire() (*client.Manifest, map[string]string) {
	e.t.Helper()
	l := &manifest.Loader{Getenv: func(string) (string, bool) { return "", false }}
	r, err := l.Load(filepath.Join(e.project, "sandbox.toml"))
	if err != nil {
		e.t.Fatalf("cannot load the manifest: %v", err)
	}
	m, values := r.Redacted()
	b, err := json.Marshal(m)
	if err != nil {
		e.t.Fatal(err)
	}
	sources := map[string]string{}
	for k, v := range r.Sources {
		if v != manifest.Literal {
			sources[k] = v.String()
		}
	}
	return &client.Manifest{File: r.File, ProjectDir: r.ProjectDir, Resolved: b, Sources: sources}, values
}

// upRequest is a create request of an up sandbox, started.
func (e *env) upRequest(id string) *client.CreateRequest {
	wm, secrets := e.wire()
	return &client.CreateRequest{ID: id, Kind: "up", Manifest: wm, Secrets: secrets, Start: true}
}

// daemon is an `airlock daemon run` subprocess.
type daemon struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	done   chan struct{}
	err    error
	client *client.Client
	pid    int
}

// startDaemon runs `airlock daemon run args…` with binary bin and waits until it
// answers; the test stops it (SIGTERM, then SIGKILL) when it ends.
func (e *env) startDaemon(bin string, args ...string) *daemon {
	e.t.Helper()
	d := e.spawnDaemon(bin, args...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		h, err := d.client.Health(ctx)
		cancel()
		if err == nil && h.PID == d.pid {
			return d
		}
		select {
		case <-d.done:
			e.t.Fatalf("airlock daemon run exited at start: %v\n%s", d.err, d.out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the daemon did not answer within 20 s\n%s", d.out)
		}
	}
}

// spawnDaemon starts `airlock daemon run` without waiting for it.
func (e *env) spawnDaemon(bin string, args ...string) *daemon {
	e.t.Helper()
	cmd := exec.Command(bin, append([]string{"daemon", "run"}, args...)...)
	cmd.Dir = e.project
	cmd.Env = e.environ()
	d := &daemon{cmd: cmd, out: &syncBuffer{}, done: make(chan struct{}), client: client.New(e.paths.Socket())}
	cmd.Stdout, cmd.Stderr = d.out, d.out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	d.pid = cmd.Process.Pid
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	e.t.Cleanup(func() { d.stop(e.t, syscall.SIGTERM) })
	return d
}

// stop signals the daemon and waits for it to end (SIGKILL after 15 s).
func (d *daemon) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		t.Errorf("the daemon did not stop within 15 s of %v\n%s", sig, d.out)
	}
}

// exited waits up to timeout for the daemon to end and reports its exit code.
func (d *daemon) exited(timeout time.Duration) (int, bool) {
	select {
	case <-d.done:
	case <-time.After(timeout):
		return 0, false
	}
	var ee *exec.ExitError
	if errors.As(d.err, &ee) {
		return ee.ExitCode(), true
	}
	return 0, true
}

// result of one CLI invocation.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// run runs the CLI bin with args in the project dir.
func (e *env) run(bin string, args ...string) result {
	e.t.Helper()
	return e.runEnv(bin, nil, args...)
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitState waits for the sandbox to reach one of states.
func waitState(t *testing.T, c *client.Client, id string, timeout time.Duration, states ...string) (*client.Sandbox, client.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sb, ev, err := c.WaitState(ctx, id, states...)
	if err != nil {
		cur, _ := c.Get(context.Background(), id)
		t.Fatalf("sandbox %s: waiting for %v: %v (now %+v)\nevents:\n%s", id, states, err, cur, dumpEvents(c, id))
	}
	return sb, ev
}

// waitReady creates nothing; it waits for ready and fails on failed.
func waitReady(t *testing.T, c *client.Client, id string) *client.Sandbox {
	t.Helper()
	sb, ev := waitState(t, c, id, 60*time.Second, client.StateReady, client.StateFailed, client.StateStopped)
	if sb.State != client.StateReady {
		t.Fatalf("sandbox %s is %s (%s), want ready\nevents:\n%s", id, sb.State, ev.Reason, dumpEvents(c, id))
	}
	return sb
}

// waitNext waits for the first of sandbox.ready, sandbox.failed, sandbox.stopped
// after from and fails unless it is want.
func waitNext(t *testing.T, c *client.Client, id string, from uint64, want string) client.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ev, err := c.WaitEvent(ctx, id, from, "sandbox.ready", "sandbox.failed", "sandbox.stopped", "sandbox.deleted")
	if err != nil || ev.Kind != want {
		t.Fatalf("sandbox %s: after %d got %s (%s) %v, want %s\nevents:\n%s", id, from, ev.Kind, ev.Reason, err, want, dumpEvents(c, id))
	}
	return ev
}

// allEvents returns the whole history of a sandbox.
func allEvents(t *testing.T, c *client.Client, id string) []client.Event {
	t.Helper()
	evs, err := readEvents(c, id, 0)
	if err != nil {
		t.Fatalf("events of %s: %v", id, err)
	}
	return evs
}

func readEvents(c *client.Client, id string, from uint64) ([]client.Event, error) {
	st, err := c.Events(context.Background(), id, from, false)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var out []client.Event
	for {
		ev, err := st.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func dumpEvents(c *client.Client, id string) string {
	evs, err := readEvents(c, id, 0)
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "  %d %s state=%s reason=%q daemon=%s exec=%s\n", ev.Sequence, ev.Kind, ev.State, ev.Reason, ev.Daemon, ev.ExecID)
	}
	if err != nil {
		fmt.Fprintf(&b, "  (%v)\n", err)
	}
	return b.String()
}

func kinds(evs []client.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind
	}
	return out
}

// assertContiguous fails unless the sequences are from+1, from+2, …
func assertContiguous(t *testing.T, what string, evs []client.Event, from uint64) {
	t.Helper()
	for i, ev := range evs {
		if want := from + uint64(i) + 1; ev.Sequence != want {
			t.Errorf("%s: event %d (%s) has sequence %d, want %d; sequences: %v", what, i, ev.Kind, ev.Sequence, want, seqs(evs))
			return
		}
	}
}

func seqs(evs []client.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Sequence
	}
	return out
}

// indexOf returns the index of the first event of kind, or -1.
func indexOf(evs []client.Event, kind string) int {
	return slices.IndexFunc(evs, func(ev client.Event) bool { return ev.Kind == kind })
}

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

// apiReason returns the reason of an API error ("" for another error or nil).
func apiReason(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return ""
}

// containerState returns the primary container's state ("" when it is gone).
func (e *env) containerState(id string) string {
	e.t.Helper()
	in, err := e.docker.ContainerInspect(context.Background(), "airlock-"+id)
	if err != nil {
		return ""
	}
	return in.State.Status
}

// forceRemove removes every container and network labelled with the project.
func forceRemove(cli *dockerclient.Client, project string) {
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
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// uniq returns s with a random suffix.
func uniq(s string) string { return s + "-" + strings.ToLower(rand.Text()[:8]) }

// procStart returns field 22 of /proc/PID/stat (the start time).
func procStart(t *testing.T, pid int) string {
	t.Helper()
	_, start, ok := control.ProcessState(pid)
	if !ok {
		t.Fatalf("no process %d", pid)
	}
	return start
}
