// Integration tests of the control daemon: they build the static airlock binary
// once, run `airlock daemon run` as a subprocess with hermetic XDG dirs and
// drive it through the public Go client against a real Docker Engine.
//
// Like every integration test of the repository, they fail when no Engine
// answers, unless AIRLOCK_SKIP_DOCKER=1.
package control_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dockerclient "github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/proc"
	"github.com/airlock-dev/airlock/paths"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

const labelProject = backend.LabelProject

// Two builds of the same source: A is the daemon under test, B plays a newer CLI.
var (
	binA, binB     string
	buildA, buildB string
	tmpRoot        string
)

func TestMain(m *testing.M) {
	if holdConns() {
		return
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	testenv.LiftParallelFlag(cap(slots))
	dir, err := os.MkdirTemp("", "airlock-control-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "control tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	tmpRoot = dir
	// B is a copy of A under another build ID: the same code, another build.
	a, err := clitest.Build(filepath.Join(dir, "airlock-a"), "ctla")
	if err != nil {
		fmt.Fprintln(os.Stderr, "control tests:", err)
		return 1
	}
	defer a.RemoveSupervisorVolume()
	b, err := a.Copy(filepath.Join(dir, "airlock-b"), "ctlb")
	if err != nil {
		fmt.Fprintln(os.Stderr, "control tests:", err)
		return 1
	}
	defer b.RemoveSupervisorVolume()
	binA, buildA, binB, buildB = a.Path, a.BuildID, b.Path, b.BuildID
	return testenv.RunClean(m)
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
	t.Cleanup(func() { testenv.ForceRemove(e.docker, labelProject, e.project) })
	return e
}

// dirs are the test user's directories.
func (e *env) dirs() clitest.Dirs {
	return clitest.Dirs{Home: e.home, Config: e.config, Data: e.data, Runtime: e.runtime}
}

func (e *env) getenv(k string) (string, bool) { return e.dirs().Getenv(k) }

func (e *env) environ() []string { return e.dirs().Environ() }

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
	return clitest.WireManifest(e.t, e.project, func(string) (string, bool) { return "", false })
}

// upRequest is a create request of an up sandbox, started.
func (e *env) upRequest(id string) *client.CreateRequest {
	wm, secrets := e.wire()
	return &client.CreateRequest{ID: id, Kind: "up", Manifest: wm, Secrets: secrets, Start: true}
}

// createReady creates an up sandbox with id ("" for one the daemon chooses) and
// waits until it is ready.
func (e *env) createReady(ctx context.Context, c *client.Client, id string) *client.Sandbox {
	e.t.Helper()
	sb, err := c.Create(ctx, e.upRequest(id))
	if err != nil {
		e.t.Fatal(err)
	}
	return waitReady(e.t, c, sb.ID)
}

// daemon is an `airlock daemon run` subprocess.
type daemon struct {
	proc   *clitest.Proc
	cmd    *exec.Cmd
	out    *syncBuffer   // its stdout and stderr
	done   chan struct{} // closed when it ended
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
			e.t.Fatalf("airlock daemon run exited at start: %v\n%s", d.proc.Err, d.out)
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
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	p := clitest.StartCmd(e.t, cmd)
	d := &daemon{proc: p, cmd: cmd, out: out, done: p.Done, client: client.New(e.paths.Socket()), pid: cmd.Process.Pid}
	e.t.Cleanup(func() {
		d.stop(e.t, syscall.SIGTERM)
		if e.t.Failed() {
			// What the daemon said (a panic, a refusal) tells why a request failed.
			e.t.Logf("output of the daemon (pid %d):\n%s", d.pid, out)
		}
	})
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
	if errors.As(d.proc.Err, &ee) {
		return ee.ExitCode(), true
	}
	return 0, true
}

// result of one CLI invocation.
type result = clitest.Result

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
	if ev.Kind == "" {
		// The state was reached before the wait began (client.WaitState then
		// gives no event): take the event that moved the sandbox into it.
		evs, _ := c.History(ctx, id, 0)
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].State == sb.State && (i == 0 || evs[i-1].State != sb.State) {
				ev = evs[i]
				break
			}
		}
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
	return c.History(context.Background(), id, from)
}

func dumpEvents(c *client.Client, id string) string {
	evs, err := readEvents(c, id, 0)
	var b strings.Builder
	for _, ev := range evs {
		code := ""
		if ev.ExitCode != nil {
			code = fmt.Sprint(*ev.ExitCode)
		}
		fmt.Fprintf(&b, "  %d %s state=%s reason=%q daemon=%s exec=%s exit=%s\n", ev.Sequence, ev.Kind, ev.State, ev.Reason, ev.Daemon, ev.ExecID, code)
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
var eventually = testenv.Eventually

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

type syncBuffer = testenv.SyncBuffer

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now.
var freePort = testenv.FreePort

// uniq returns s with a random suffix.
func uniq(s string) string { return s + "-" + strings.ToLower(rand.Text()[:8]) }

// procStart returns field 22 of /proc/PID/stat (the start time).
func procStart(t *testing.T, pid int) string {
	t.Helper()
	_, start, ok := proc.State(pid)
	if !ok {
		t.Fatalf("no process %d", pid)
	}
	return start
}

// slots bounds how many tests drive the Engine at once: most of a test's time
// is spent waiting on daemons and the Engine, not on the cores
// (AIRLOCK_CONTROL_PARALLEL overrides the default).
var slots = make(chan struct{}, testenv.Parallelism("AIRLOCK_CONTROL_PARALLEL", 3))

// parallel runs the rest of the test beside at most cap(slots)-1 others.
func parallel(t *testing.T) {
	t.Parallel()
	slots <- struct{}{}
	t.Cleanup(func() { <-slots })
}
