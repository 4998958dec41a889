package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// slowDaemonManifest has a daemon that takes 2 s to stop once the main
// command ended: run returns while it still shuts down.
const slowDaemonManifest = trustManifest + `
[daemons.slow]
command = ["sh", "-c", "trap 'sleep 2; exit 0' TERM; while :; do sleep 1; done"]
`

// TestTrustOwnEditsAfterRun: what the user does on the host once run returned
// (delete sandbox.local.toml, edit it, rewrite sandbox.toml so that it widens
// the user and the ports, while the run's daemon still stops) is never
// refused nor asked about.
func TestTrustOwnEditsAfterRun(t *testing.T) {
	limit(t)
	e := newEnv(t, trustManifest)
	e.WriteFile("sandbox.local.toml", "[env]\nB = \"2\"\n")

	// Deleted right after a run of a sandbox without daemons.
	e.MustRun("run", "--", "true")
	if err := os.Remove(filepath.Join(e.Project, "sandbox.local.toml")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if r := e.Run("run", "--", "true"); r.Code != 0 {
			t.Fatalf("run %d after the user deleted sandbox.local.toml: %s", i, r)
		}
	}
	e.WriteFile("sandbox.local.toml", "[env]\nB = \"2\"\n")
	e.MustRun("run", "--", "true")

	// Edited right after a run: B = "2" -> "5".
	e.WriteFile("sandbox.local.toml", "[env]\nB = \"5\"\n")
	if r := e.Run("run", "--", "sh", "-c", "echo $B"); r.Code != 0 || strings.TrimSpace(r.Stdout) != "5" {
		t.Fatalf("the user's edit of sandbox.local.toml: %s", r)
	}
}

// TestTrustRewriteWhileDaemonsStop: sandbox.toml rewritten for another job at
// once after a run returned (its daemon still stopping), then up -d: taken,
// though it widens the user and the ports.
func TestTrustRewriteWhileDaemonsStop(t *testing.T) {
	limit(t)
	e := newEnv(t, slowDaemonManifest)
	defer e.Run("down")
	e.MustRun("run", "--", "true")
	if len(e.Containers()) == 0 {
		t.Fatal("the run's sandbox is gone already: the test needs its daemon still stopping")
	}
	e.WriteManifest(strings.ReplaceAll(trustManifest, "network = \"none\"", "user = \"root\"\nports = [\"127.0.0.1::8080\"]"))
	if r := e.Run("up", "-d"); r.Code != 0 {
		t.Fatalf("up -d after the user's rewrite: %s", r)
	}
	e.MustRun("down")
}

// TestTrustKeepRemoveRewrite: run --keep, rm -f, rewrite sandbox.toml, then
// three up -d at once: one sandbox, the others told one runs; none refused
// by the trust check.
func TestTrustKeepRemoveRewrite(t *testing.T) {
	limit(t)
	e := newEnv(t, slowDaemonManifest)
	defer e.Run("down")
	r := e.MustRun("run", "--keep", "-q", "--", "true")
	id := ""
	for _, s := range e.PS() {
		id = s.ID
	}
	if id == "" {
		t.Fatalf("no kept sandbox: %s", r)
	}
	e.MustRun("rm", "-f", id)
	e.WriteManifest(strings.ReplaceAll(trustManifest, "network = \"none\"", "user = \"root\""))
	var wg sync.WaitGroup
	results := make([]result, 3)
	for i := range results {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = e.Run("up", "-d") }()
	}
	wg.Wait()
	ok := 0
	for _, r := range results {
		if strings.Contains(r.Stderr, "airlock trust") {
			t.Errorf("refused by the trust check: %s", r)
		}
		if r.Code == 0 {
			ok++
		}
	}
	if ps := e.PS(); ok == 0 || len(ps) != 1 {
		t.Fatalf("three up -d at once: %d succeeded, sandboxes %+v; %v", ok, ps, results)
	}
}

// TestTrustRunSeesLayersReadOnly: code in a run cannot change an existing
// layer (write, replace, remove): the Engine refuses, and the next run starts
// from the same layers without a question.
func TestTrustRunSeesLayersReadOnly(t *testing.T) {
	limit(t)
	e := newEnv(t, trustManifest)
	e.WriteFile("sandbox.local.toml", "[env]\nB = \"2\"\n")
	for _, cmd := range []string{
		`printf '[mounts.h]\nsource = "/etc"\ntarget = "/h"\n' >> sandbox.local.toml`,
		`printf 'x' > new.toml && mv new.toml sandbox.toml`,
		`rm sandbox.local.toml`,
	} {
		r := e.Run("run", "--", "sh", "-c", cmd)
		if r.Code == 0 {
			t.Errorf("%s: the sandbox changed a layer: %s", cmd, r)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(e.Project, "sandbox.local.toml")); string(data) != "[env]\nB = \"2\"\n" {
		t.Errorf("sandbox.local.toml: %q", data)
	}
	e.MustRun("run", "--", "true")
}

// TestTrustSymlinkedLayer: sandbox.local.toml made a link (from inside, to a
// file that was there already, mounting /etc) is refused with a clear error;
// so are a link to /dev/zero and a FIFO, at once.
func TestTrustSymlinkedLayer(t *testing.T) {
	limit(t)
	e := newEnv(t, trustManifest)
	e.WriteFile("examples/wide.toml", "[mounts.etc]\nsource = \"/etc\"\ntarget = \"/hostetc\"\n")
	e.MustRun("run", "--", "ln", "-s", "examples/wide.toml", "sandbox.local.toml")
	r := e.Run("run", "--", "cat", "/hostetc/hostname")
	if r.Code != 2 {
		t.Errorf("a symlinked layer: want exit 2, got %s", r)
	}
	contains(t, "stderr", r.Stderr, "sandbox.local.toml is a symbolic link", "regular file")

	local := filepath.Join(e.Project, "sandbox.local.toml")
	os.Remove(local)
	if err := os.Symlink("/dev/zero", local); err != nil {
		t.Fatal(err)
	}
	if r := e.Run("run", "--", "true"); r.Code != 2 || !strings.Contains(r.Stderr, "symbolic link") {
		t.Errorf("a link to /dev/zero: %s", r)
	}
	os.Remove(local)
	if err := syscall.Mkfifo(local, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if r := e.Run("run", "--", "true"); r.Code != 2 || !strings.Contains(r.Stderr, "not a regular file (a FIFO)") {
		t.Errorf("a FIFO: %s (after %s)", r, time.Since(start))
	}
	os.Remove(local)
}

// TestTrustPlantedManifest: a sandbox.toml a run planted in a subfolder (with
// a host mount) is refused the first time someone runs there.
func TestTrustPlantedManifest(t *testing.T) {
	limit(t)
	e := newEnv(t, trustManifest)
	planted := strings.ReplaceAll(trustManifest, "{{image}}", e.Image) + "[mounts.etc]\nsource = \"/etc\"\ntarget = \"/hostetc\"\n"
	e.MustRun("run", "--", "sh", "-c", "mkdir web && cat > web/sandbox.toml <<'EOF'\n"+planted+"EOF\n")
	e.waitGone()
	r := e.RunIn(filepath.Join(e.Project, "web"), nil, "run", "--", "cat", "/hostetc/hostname")
	if r.Code != 2 {
		t.Errorf("a planted manifest: want exit 2, got %s", r)
	}
	contains(t, "stderr", r.Stderr, "sandbox.toml changed while sandbox", "mounts (mounts.etc: /etc -> /hostetc)")
	e.RunIn(filepath.Join(e.Project, "web"), nil, "down")
}

// TestTrustComposeExtends: a file the compose file extends is a layer: a
// sandbox that rewrites it to bind /etc into a service is refused at the
// next up, naming it; in a run it cannot write it at all.
func TestTrustComposeExtends(t *testing.T) {
	limit(t)
	e := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n\n[compose]\nfile = \"compose.yaml\"\n")
	defer e.Run("down")
	e.WriteFile("compose.yaml", "services:\n  web:\n    extends:\n      file: base.yaml\n      service: base\n")
	e.WriteFile("base.yaml", "services:\n  base:\n    image: "+e.Image+"\n    command: [\"sleep\", \"300\"]\n")
	if r := e.Run("run", "--", "sh", "-c", "echo '    volumes: [\"/etc:/hostetc\"]' >> base.yaml"); r.Code == 0 {
		t.Errorf("a run wrote the file its compose file extends: %s", r)
	}
	e.MustRun("up", "-d")
	e.MustRun("exec", "--", "sh", "-c", "echo '    volumes: [\"/etc:/hostetc\"]' >> base.yaml")
	e.MustRun("stop")
	r := e.Run("up", "-d")
	if r.Code != 2 {
		t.Errorf("up -d after the sandbox rewrote base.yaml: want exit 2, got %s", r)
	}
	contains(t, "stderr", r.Stderr, "base.yaml changed while sandbox", "/etc:/hostetc")
}

// TestTrustPoolWritesLayer: a parked pool sandbox that writes
// sandbox.local.toml after the run that changed its daemon's script ended (no
// run's session covers it) does not widen the next run: the pool is a session
// from its first sandbox's creation until it holds none.
func TestTrustPoolWritesLayer(t *testing.T) {
	limit(t)
	e := newEnv(t, trustManifest+`
[sandbox.pool]
size = 1

[daemons.job]
command = ["sh", "{{project}}/daemon.sh"]
`)
	e.WriteManifest(strings.ReplaceAll(strings.ReplaceAll(trustManifest+`
[sandbox.pool]
size = 1

[daemons.job]
command = ["sh", "{{project}}/daemon.sh"]
`, "{{project}}", e.Project), "{{image}}", e.Image))
	t.Cleanup(func() { e.Run("pool", "drain") })
	e.WriteFile("daemon.sh", "while :; do sleep 1; done\n")
	e.MustRun("run", "--", "true")
	// Run 2 rewrites the daemon's script (not a layer): the sandbox parked
	// after it writes the layer.
	e.MustRun("run", "--", "sh", "-c", `printf '%s\n' "cd $PWD" "printf '[mounts.etc]\\nsource = \"/etc\"\\ntarget = \"/hostetc\"\\n' > sandbox.local.toml" 'while :; do sleep 1; done' > daemon.sh`)
	// The sandbox parked while run 2 ran may have started the old script;
	// the next ones start the new one. Runs until one of them wrote the layer
	// (a run may be refused already, when a parked sandbox wrote it first).
	local := filepath.Join(e.Project, "sandbox.local.toml")
	for i := 0; i < 5; i++ {
		if _, err := os.Stat(local); err == nil {
			break
		}
		if r := e.Run("run", "--", "true"); r.Code != 0 && !strings.Contains(r.Stderr, "sandbox.local.toml changed while") {
			t.Fatalf("run %d: %s", i+3, r)
		}
	}
	// Written whole (the shell's > makes it empty first).
	eventually(t, cmdTimeout, "a parked sandbox to write sandbox.local.toml", func() bool {
		b, err := os.ReadFile(local)
		return err == nil && strings.Contains(string(b), "/hostetc")
	})
	r := e.Run("run", "--", "cat", "/hostetc/hostname")
	if r.Code != 2 {
		t.Errorf("the layer a parked sandbox wrote: want exit 2, got %s", r)
	}
	contains(t, "stderr", r.Stderr, "sandbox.local.toml changed while", "mounts (mounts.etc: /etc -> /hostetc)")
}

// TestTrustNarrowChangePasses: a layer a sandbox wrote that widens nothing
// (an env value) is taken at the next run with a one-line notice.
func TestTrustNarrowChangePasses(t *testing.T) {
	limit(t)
	e := newEnv(t, trustManifest)
	e.MustRun("run", "--", "sh", "-c", `printf '[env]\nA = "1"\n' > sandbox.local.toml`)
	r := e.Run("run", "--", "sh", "-c", "echo $A")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != "1" {
		t.Fatalf("a change that widens nothing: %s", r)
	}
	contains(t, "stderr", r.Stderr, "notice: sandbox.local.toml changed while sandbox", "widens nothing")
	if r := e.MustRun("run", "--", "true"); strings.Contains(r.Stderr, "notice") {
		t.Errorf("the notice again: %s", r)
	}
}
