package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/internal/ids"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/paths"
	"github.com/airlock-dev/airlock/test/testenv"
)

// The integration tests of this package drive a Runtime against the real Engine.
// TestMain (main_test.go) owns a temporary folder for the static airlock binary
// they inject, built once, on first use.

var testBin struct {
	dir  string
	once sync.Once
	path string
	err  error
}

// airlockBinary builds the static airlock binary once per test process.
func airlockBinary(t testing.TB) string {
	t.Helper()
	testBin.once.Do(func() {
		out := filepath.Join(testBin.dir, "airlock")
		if testBin.err = testenv.BuildAirlock(out, ""); testBin.err != nil {
			return
		}
		testBin.path = out
	})
	if testBin.err != nil {
		t.Fatal(testBin.err)
	}
	return testBin.path
}

type syncBuffer = testenv.SyncBuffer

// testRig is a Runtime over hermetic paths, with its progress captured.
type testRig struct {
	t        *testing.T
	cli      *client.Client
	rt       *Runtime
	progress *syncBuffer
	env      map[string]string
	busybox  string
}

func newRig(t *testing.T) *testRig {
	t.Helper()
	cli := testenv.Client(t)
	img := testenv.BusyboxImage(t)
	home := t.TempDir()
	env := map[string]string{
		"HOME":            home,
		"XDG_CONFIG_HOME": filepath.Join(home, "config"),
		"XDG_DATA_HOME":   filepath.Join(home, "data"),
		"XDG_RUNTIME_DIR": filepath.Join(home, "run"),
	}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	p, err := paths.FromEnv(getenv)
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncBuffer{}
	return &testRig{
		t: t, cli: cli, progress: buf, env: env, busybox: img,
		rt: &Runtime{
			Engine: cli, Paths: p, Progress: buf, Binary: airlockBinary(t),
			BuildID: rigBuildID, Getenv: getenv,
		},
	}
}

// manifest resolves a sandbox.toml given as text; {{busybox}} stands for the test image.
func (g *testRig) manifest(dir, toml string) *manifest.Resolved {
	g.t.Helper()
	toml = strings.ReplaceAll(toml, "{{busybox}}", g.busybox)
	l := &manifest.Loader{Getenv: func(k string) (string, bool) { v, ok := g.env[k]; return v, ok }}
	r, err := l.LoadBytes(manifest.FileName, dir, []byte(toml))
	if err != nil {
		g.t.Fatalf("manifest: %v\n%s", err, toml)
	}
	return r
}

// create makes a run sandbox and registers its removal and the leftover check.
func (g *testRig) create(ctx context.Context, r *manifest.Resolved, cmd ...string) *backend.Sandbox {
	g.t.Helper()
	sb, err := g.rt.Create(ctx, &backend.Request{Manifest: r, Kind: backend.KindRun, Command: cmd})
	if err != nil {
		g.t.Fatalf("Create: %v", err)
	}
	g.cleanup(sb.ID)
	return sb
}

// cleanup removes the sandbox when the test ends, then checks that nothing is left.
func (g *testRig) cleanup(id string) {
	g.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := g.rt.Remove(ctx, id); err != nil {
			g.t.Errorf("Remove: %v", err)
		}
		testenv.AssertNoLeftovers(g.t, g.cli, backend.LabelSandbox, id)
	})
}

// run starts a created sandbox and returns the main command's exit code and output.
func (g *testRig) run(ctx context.Context, sb *backend.Sandbox) (int, string, string) {
	g.t.Helper()
	m := g.attach(ctx, sb)
	if err := g.rt.Start(ctx, sb); err != nil {
		g.t.Fatalf("Start: %v", err)
	}
	code := m.wait(g.t, ctx)
	return code, m.stdout.String(), m.stderr.String()
}

// mainCommand is the main command of a sandbox attached to before its start.
type mainCommand struct {
	stdout, stderr syncBuffer
	codes          <-chan int
	errs           <-chan error
	output         <-chan error
}

// attach waits for the exit of a created sandbox's main command and attaches
// to its output, before the test starts it.
func (g *testRig) attach(ctx context.Context, sb *backend.Sandbox) *mainCommand {
	g.t.Helper()
	m := &mainCommand{}
	m.codes, m.errs = g.rt.WaitExit(ctx, sb)
	var err error
	if m.output, err = g.rt.Attach(ctx, sb, backend.Streams{Stdout: &m.stdout, Stderr: &m.stderr}); err != nil {
		g.t.Fatalf("Attach: %v", err)
	}
	return m
}

// wait waits for the main command to exit and its output to end, and returns
// its exit code.
func (m *mainCommand) wait(t *testing.T, ctx context.Context) int {
	t.Helper()
	select {
	case code := <-m.codes:
		select {
		case <-m.output:
		case <-ctx.Done():
			t.Fatalf("output did not end: %v", ctx.Err())
		}
		return code
	case err := <-m.errs:
		t.Fatalf("WaitExit: %v", err)
	case <-ctx.Done():
		t.Fatalf("the sandbox did not exit: %v (stdout %q, stderr %q)", ctx.Err(), m.stdout.String(), m.stderr.String())
	}
	return 0
}

// waitFor waits, polling, until cond holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		<-tick.C
	}
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

const webCommand = `["sh", "-c", "mkdir -p /www && echo hello-from-web > /www/index.html && echo web-up && exec httpd -f -v -p 80 -h /www"]`

func TestServiceReachableByName(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := testContext(t, 2*time.Minute)
	r := g.manifest(t.TempDir(), `
[sandbox]
image = "{{busybox}}"
ready_timeout = "20s"

[services.web]
image = "{{busybox}}"
command = `+webCommand+`
env = { B_VAR = "two", A_VAR = "one" }
healthcheck = { cmd = ["wget", "-qO", "/dev/null", "http://127.0.0.1/"], interval = "1s", timeout = "2s", retries = 100 }
`)
	sb := g.create(ctx, r, "wget", "-qO-", "http://web/")
	id, ok := sb.Services["web"]
	if !ok {
		t.Fatalf("sb.Services = %v, want web", sb.Services)
	}
	ci, err := g.cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if want := "/airlock-" + sb.ID + "-web"; ci.Name != want {
		t.Errorf("service container name = %q, want %q", ci.Name, want)
	}
	for k, want := range map[string]string{backend.LabelSandbox: sb.ID, backend.LabelRole: "service", backend.LabelService: "web", backend.LabelProject: r.ProjectDir} {
		if got := ci.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	var env []string
	for _, kv := range ci.Config.Env {
		if strings.HasSuffix(strings.SplitN(kv, "=", 2)[0], "_VAR") {
			env = append(env, kv)
		}
	}
	if strings.Join(env, " ") != "A_VAR=one B_VAR=two" {
		t.Errorf("service env = %v, want A_VAR=one B_VAR=two in order", env)
	}
	hc := ci.Config.Healthcheck
	if hc == nil || strings.Join(hc.Test, " ") != "CMD wget -qO /dev/null http://127.0.0.1/" || hc.Interval != time.Second || hc.Timeout != 2*time.Second || hc.Retries != 100 {
		t.Errorf("healthcheck = %+v", hc)
	}
	if es := ci.NetworkSettings.Networks[sb.Network]; es == nil || !contains(es.Aliases, "web") {
		t.Errorf("service endpoint on %s = %+v, want alias web", sb.Network, es)
	}

	code, stdout, stderr := g.run(ctx, sb)
	if code != 0 || strings.TrimSpace(stdout) != "hello-from-web" {
		t.Fatalf("wget http://web/ = exit %d, stdout %q, stderr %q; want 0 and hello-from-web", code, stdout, stderr)
	}
	// Start waited for the healthcheck to pass before the main command ran.
	ci, err = g.cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if ci.State.Health == nil || ci.State.Health.Status != "healthy" {
		t.Errorf("service health = %+v, want healthy", ci.State.Health)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestRequiredServiceFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		service string
		want    []string
		within  time.Duration // Start must fail within this
	}{{
		name: "never-healthy",
		// A probe or two fails within ready_timeout: each is an exec on the
		// Engine, so not one every 100 ms.
		service: `command = ["sh", "-c", "echo db-starting; echo db-last-words; exec sleep 3600"]
healthcheck = { cmd = ["false"], interval = "700ms", retries = 10000 }`,
		want:   []string{"service db is not healthy after 2s (healthcheck false)", "last log lines:", "db-starting", "db-last-words"},
		within: 10 * time.Second,
	}, {
		name: "unhealthy",
		service: `command = ["sh", "-c", "echo db-last-words; exec sleep 3600"]
healthcheck = { cmd = ["sh", "-c", "echo probe-says-no; exit 1"], interval = "100ms", retries = 2 }`,
		want:   []string{"service db is unhealthy (healthcheck sh -c echo probe-says-no; exit 1 failed ", " times: probe-says-no)", "db-last-words"},
		within: 10 * time.Second,
	}, {
		name: "exits",
		service: `command = ["sh", "-c", "echo db-crashed >&2; exit 3"]
healthcheck = { cmd = ["false"], interval = "100ms", retries = 10000 }`,
		want:   []string{"service db exited with code 3 before it was healthy", "db-crashed"},
		within: 10 * time.Second,
	}, {
		name:    "cannot-start",
		service: `command = ["no-such-program"]`,
		want:    []string{"cannot start service db: ", "no-such-program"},
		within:  10 * time.Second,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newRig(t)
			ctx := testContext(t, 2*time.Minute)
			r := g.manifest(t.TempDir(), `
[sandbox]
image = "{{busybox}}"
ready_timeout = "2s"

[services.db]
image = "{{busybox}}"
`+tc.service+`

[services.web]
image = "{{busybox}}"
command = `+webCommand+`
`)
			sb := g.create(ctx, r, "true")
			start := time.Now()
			err := g.rt.Start(ctx, sb)
			elapsed := time.Since(start)
			t.Logf("Start after %v: %v", elapsed.Round(time.Millisecond), err)
			var e *backend.Error
			if !errors.As(err, &e) || e.Code != 125 {
				t.Fatalf("Start = %v, want an *Error with code 125", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Start error lacks %q:\n%v", w, err)
				}
			}
			if elapsed > tc.within {
				t.Errorf("Start failed after %v, want within %v", elapsed, tc.within)
			}
			// The primary was never started.
			ci, ierr := g.cli.ContainerInspect(ctx, sb.PrimaryID)
			if ierr != nil {
				t.Fatal(ierr)
			}
			if ci.State.Status != "created" {
				t.Errorf("primary state = %s, want created", ci.State.Status)
			}
		})
	}
}

func TestOptionalServicesDoNotGate(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := testContext(t, 2*time.Minute)
	r := g.manifest(t.TempDir(), `
[sandbox]
image = "{{busybox}}"
ready_timeout = "60s"

[services.flaky]
image = "{{busybox}}"
required = false
command = ["sh", "-c", "echo flaky-died; exit 1"]
# Without a healthcheck a running service counts as ready, and a loaded Engine can
# show it running before it exits: a check that never passes makes its only result
# the failure.
healthcheck = { cmd = ["false"], interval = "100ms", retries = 10000 }

# Never healthy: the Engine shows it "starting" for as long as the test runs
# (the probe, an exec on the Engine, need not run every 100 ms for that).
[services.slow]
image = "{{busybox}}"
required = false
command = ["sleep", "3600"]
healthcheck = { cmd = ["false"], interval = "1h", retries = 10000 }

[services.missing]
image = "{{busybox}}"
required = false
command = ["no-such-program"]

# Healthy only once the test drops /tmp/go into it, after Start returned: had
# Start waited for optional services, it would have returned an error or a
# report of gate (not healthy after ready_timeout) first. ready_timeout is long,
# so that gate cannot time out before the test releases it on a slow machine.
[services.gate]
image = "{{busybox}}"
required = false
command = ["sleep", "3600"]
healthcheck = { cmd = ["test", "-e", "/tmp/go"], interval = "300ms", retries = 10000 }

[services.side]
image = "{{busybox}}"
required = false
command = `+webCommand+`

[services.web]
image = "{{busybox}}"
command = `+webCommand+`
`)
	// The main command outlives the reports: an optional service's failure seen
	// after the primary ended is not reported (it is the sandbox's teardown). It
	// ends when the test has seen them and drops /tmp/reports-seen into it.
	sb := g.create(ctx, r, "sh", "-c", "wget -qO- http://web/; until [ -e /tmp/reports-seen ]; do sleep 0.1; done")
	// Cancelling the Start context ends the background reports.
	startCtx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()

	m := g.attach(ctx, sb)
	if err := g.rt.Start(startCtx, sb); err != nil {
		t.Fatalf("Start = %v, want nil: optional services do not gate", err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("progress:\n%s", g.progress.String())
		}
	}()
	if p := g.progress.String(); strings.Contains(p, "optional service gate") {
		t.Errorf("gate was reported before Start returned, though nothing made it healthy yet: Start waited for it:\n%s", p)
	}
	if err := g.cli.CopyToContainer(ctx, serviceName(sb.ID, "gate"), "/tmp", markerTar(t, "go"), container.CopyToContainerOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the optional services' reports", func() bool {
		p := g.progress.String()
		return strings.Contains(p, "optional service flaky failed") && strings.Contains(p, "optional service side is ready") &&
			strings.Contains(p, "optional service gate is ready") &&
			strings.Contains(p, "optional service missing failed: cannot start service missing")
	})
	if err := g.cli.CopyToContainer(ctx, sb.PrimaryID, "/tmp", markerTar(t, "reports-seen"), container.CopyToContainerOptions{}); err != nil {
		t.Fatal(err)
	}
	if code := m.wait(t, ctx); code != 0 || strings.TrimSpace(m.stdout.String()) != "hello-from-web" {
		t.Errorf("main = exit %d, stdout %q, stderr %q", code, m.stdout.String(), m.stderr.String())
	}
	p := g.progress.String()
	for _, w := range []string{"service flaky exited with code 1", "flaky-died"} {
		if !strings.Contains(p, w) {
			t.Errorf("progress lacks %q:\n%s", w, p)
		}
	}
	if strings.Count(p, "optional service flaky") != 1 {
		t.Errorf("flaky reported more than once:\n%s", p)
	}
}

func TestServicesNeedBridge(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := testContext(t, time.Minute)
	r := g.manifest(t.TempDir(), `
[sandbox]
image = "{{busybox}}"
network = "none"

[services.web]
image = "{{busybox}}"
`)
	id := "svc-none-" + ids.New()[:8]
	_, err := g.rt.Create(ctx, &backend.Request{ID: id, Manifest: r, Kind: backend.KindRun, Command: []string{"true"}})
	testenv.AssertNoLeftovers(t, g.cli, backend.LabelSandbox, id)
	var e *backend.Error
	if !errors.As(err, &e) || e.Code != 2 || !strings.Contains(err.Error(), "bridge") {
		t.Fatalf("Create = %v, want a config error about the bridge network", err)
	}
}

// markerTar is a tar stream holding one empty file, name.
func markerTar(t *testing.T, name string) io.Reader {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &b
}
