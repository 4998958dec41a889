package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/test/testenv"
)

const plainManifest = `
[sandbox]
image = "{{image}}"
`

// TestRunStreamsAndExitCodes: stdout and stderr apart, and the main command's
// exit code, 126 and 127 included (design.md §9).
func TestRunStreamsAndExitCodes(t *testing.T) {
	limit(t)
	e := newEnv(t, plainManifest)

	// The streams apart with a code of the command's own (each case is a
	// sandbox of its own: one per code; exit 0 is every other test's).
	r := e.Run("run", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if r.Code != 7 || r.Stdout != "out\n" {
		t.Errorf("streams: want exit 7 and stdout %q, got %s", "out\n", r)
	}
	contains(t, "stderr", r.Stderr, "err")
	e.assertClean()

	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"notfound", []string{"nonexistent-cmd"}, 127, "nonexistent-cmd"},
		{"notexec", []string{"/etc/passwd"}, 126, "/etc/passwd"},
		{"sigterm", []string{"sh", "-c", "kill -TERM $$"}, 143, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.Run(append([]string{"run", "--"}, tc.args...)...)
			if r.Code != tc.code {
				t.Errorf("want exit %d, got %s", tc.code, r)
			}
			if tc.msg != "" {
				contains(t, "stderr", r.Stderr, tc.msg)
			}
			e.assertClean()
		})
	}
}

// TestRunDaemonReadyGatesMain: the main command starts only once the daemon's ready
// check passes, so its first request succeeds.
func TestRunDaemonReadyGatesMain(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"

[daemons.web]
# starts listening a second late: only the ready check makes the first wget succeed
command = ["sh", "-c", "sleep 1; exec httpd -f -p 127.0.0.1:8080 -h {{project}}/www"]
ready = { tcp = "127.0.0.1:8080", timeout = "20s" }
`)
	e.WriteFile("www/index.html", "page-from-daemon\n")
	r := e.Run("run", "--", "wget", "-qO-", "http://127.0.0.1:8080/")
	if r.Code != 0 || r.Stdout != "page-from-daemon\n" {
		t.Errorf("want the page and exit 0, got %s", r)
	}
	e.assertClean()
}

// TestRunEnvWorkdir: -e, -w and [env] (a host variable substituted) reach the main
// command; the substituted value is not in the container's configuration; daemons
// do not get [env].
func TestRunEnvWorkdir(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"

[env]
FROM_HOST = "${E2E_HOST_VAR}"
LITERAL = "lit-value"

[daemons.d]
command = ["sh", "-c", "echo \"daemon FROM_HOST=[$FROM_HOST] LITERAL=[$LITERAL] OWN=[$OWN]\"; echo daemon-ready; exec sleep 300"]
timeout = 1
ready = { log = "daemon-ready", timeout = "10s" }
[daemons.d.env]
OWN = "own-value"
`)
	secret := uniq("host-secret")
	id := uniq("envtest")
	r := e.RunEnv([]string{"E2E_HOST_VAR=" + secret}, "run", "--keep", "--id", id, "-e", "K=V", "-e", "LITERAL=over", "-w", "/tmp",
		"--", "sh", "-c", `echo "$FROM_HOST|$LITERAL|$K|$(pwd)"`)
	if want := secret + "|over|V|/tmp\n"; r.Code != 0 || r.Stdout != want {
		t.Errorf("want stdout %q and exit 0, got %s", want, r)
	}

	// The kept sandbox's configuration must not hold the substituted value.
	ci, err := e.Cli.ContainerInspect(context.Background(), "airlock-"+id)
	if err != nil {
		t.Fatalf("cannot inspect the kept sandbox: %v", err)
	}
	b, _ := json.Marshal(ci)
	if strings.Contains(string(b), secret) {
		t.Errorf("docker inspect of the sandbox shows the substituted value %q:\n%v", secret, ci.Config.Env)
	}
	spec := testenv.ReadContainerFile(context.Background(), e.Cli, "airlock-"+id, backend.SpecIn)
	if !strings.Contains(string(b), "lit-value") && !strings.Contains(spec, "lit-value") {
		t.Errorf("the literal [env] value is neither in the container config nor the spec:\n%s", spec)
	}
	if strings.Contains(spec, secret) {
		t.Errorf("the spec uploaded into the sandbox holds the substituted value")
	}
	if fileTreeContains(e.Data, secret) || fileTreeContains(e.Runtime, secret) {
		t.Errorf("a file airlock wrote on the host holds the substituted value")
	}

	logs := e.MustRun("logs", id, "d")
	contains(t, "daemon log", logs.Stdout, "FROM_HOST=[] LITERAL=[] OWN=[own-value]")

	e.MustRun("rm", id)
	e.assertClean()
}

func fileTreeContains(dir, s string) bool {
	found := false
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), s) {
				found = true
			}
		}
		return nil
	})
	return found
}

// TestRunKeepPsLogsRm: --keep leaves a stopped sandbox that ps lists and logs reads;
// rm by ID or by label removes everything; --id is the ID, a bad one is refused.
func TestRunKeepPsLogsRm(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"

[daemons.greeter]
command = ["sh", "-c", "echo hello-from-greeter; exec sleep 300"]
timeout = 1
ready = { log = "hello-from-greeter", timeout = "10s" }
`)
	team := uniq("x")
	id := uniq("myid-123")
	r := e.Run("run", "--keep", "--id", id, "--label", "team="+team, "--", "true")
	if r.Code != 0 {
		t.Fatalf("run --keep: %s", r)
	}
	contains(t, "stderr", r.Stderr, id)

	ps := e.PS()
	if len(ps) != 1 {
		t.Fatalf("ps -a --json lists %d sandboxes of the project, want 1: %+v", len(ps), ps)
	}
	p := ps[0]
	if p.ID != id || p.State != "stopped" || p.Project != e.Project || p.CreatedAt == nil || p.Daemons == nil || p.Labels["team"] != team {
		t.Errorf("ps -a --json entry = %+v (daemons %+v), want id %s, state stopped, project %s, created_at, daemons, labels team=%s", p, p.Daemons, id, e.Project, team)
	}
	if p.Daemons != nil && p.Daemons.Total != 1 {
		t.Errorf("daemons total = %d, want 1", p.Daemons.Total)
	}
	if p.CreatedAt != nil && time.Since(*p.CreatedAt) > 10*time.Minute {
		t.Errorf("created_at = %v, not recent", p.CreatedAt)
	}
	// ps filters by label too.
	lr := e.MustRun("ps", "-a", "--json", "--label", "team="+team)
	contains(t, "ps --label", lr.Stdout, id)

	logs := e.MustRun("logs", id, "greeter")
	if logs.Stdout != "hello-from-greeter\n" {
		t.Errorf("logs %s greeter = %q, want %q", id, logs.Stdout, "hello-from-greeter\n")
	}

	e.MustRun("rm", id)
	e.assertClean()

	// By label.
	r = e.Run("run", "--keep", "--label", "team="+team, "--", "true")
	if r.Code != 0 {
		t.Fatalf("run --keep: %s", r)
	}
	if len(e.PS()) != 1 {
		t.Fatalf("want one kept sandbox")
	}
	e.MustRun("rm", "--label", "team="+team)
	if ps := e.PS(); len(ps) != 0 {
		t.Errorf("after rm --label, ps lists %+v", ps)
	}
	e.assertClean()

	// A bad ID: usage error, nothing made.
	r = e.Run("run", "--id", "b@d id", "--", "true")
	if r.Code != 2 {
		t.Errorf("run --id 'b@d id': want exit 2, got %s", r)
	}
	e.assertClean()
}

// TestRunMissingMountFails: a missing source with missing = "fail" is a config
// error naming the key, before any object exists.
func TestRunMissingMountFails(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"

[mounts.data]
source = "./not-there"
target = "/data"
missing = "fail"
`)
	r := e.Run("run", "--", "true")
	if r.Code != 2 || !strings.HasPrefix(r.Stderr, "config error:") {
		t.Errorf("want exit 2 and a stderr starting with 'config error:', got %s", r)
	}
	contains(t, "stderr", r.Stderr, "mounts.data")
	e.assertClean()
	if _, err := os.Stat(filepath.Join(e.Project, "not-there")); err == nil {
		t.Errorf("the missing source was created")
	}
}

// TestRunMountsAndCopies: create-dir, read_only, ~ in a source, and copies with
// exclude owned by the sandbox user.
func TestRunMountsAndCopies(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"
user = "nobody"

[mounts.made]
source = "./made"
target = "/made"
missing = "create-dir"
create_mode = "777"

[mounts.ro]
source = "./rodir"
target = "/ro"
read_only = true

[mounts.home]
source = "~/hdata"
target = "/hdata"

[copies.seed]
source = "./seed"
target = "/seed"
exclude = [".git", "*.tmp"]
`)
	e.WriteFile("rodir/existing", "ro\n")
	if err := os.Chmod(filepath.Join(e.Project, "rodir"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(e.Home, "hdata"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Home, "hdata", "file"), []byte("from-home\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.WriteFile("seed/a.txt", "a\n")
	e.WriteFile("seed/sub/c.txt", "c\n")
	e.WriteFile("seed/b.tmp", "tmp\n")
	e.WriteFile("seed/.git/config", "git\n")

	script := `set -e
echo made > /made/f
cat /hdata/file
cat /ro/existing
if echo x > /ro/new 2>/dev/null; then echo ro-writable; else echo ro-refused; fi
find /seed | sort
stat -c '%u %n' /seed /seed/a.txt /seed/sub /seed/sub/c.txt
id -u`
	r := e.Run("run", "--", "sh", "-c", script)
	want := `from-home
ro
ro-refused
/seed
/seed/a.txt
/seed/sub
/seed/sub/c.txt
65534 /seed
65534 /seed/a.txt
65534 /seed/sub
65534 /seed/sub/c.txt
65534
`
	if r.Code != 0 || r.Stdout != want {
		t.Errorf("want exit 0 and stdout\n%s\ngot %s", want, r)
	}
	if b, err := os.ReadFile(filepath.Join(e.Project, "made", "f")); err != nil || string(b) != "made\n" {
		t.Errorf("the create-dir mount: host file made/f = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(e.Project, "rodir", "new")); err == nil {
		t.Errorf("a file was written through the read-only mount")
	}
	e.assertClean()
}

// TestRunEngineUnreachable: 125 with how to start the Engine, nothing created.
func TestRunEngineUnreachable(t *testing.T) {
	limit(t)
	e := newEnv(t, plainManifest)
	r := e.RunEnv([]string{"DOCKER_HOST=unix:///nonexistent.sock"}, "run", "--", "true")
	if r.Code != 125 {
		t.Errorf("want exit 125, got %s", r)
	}
	contains(t, "stderr", r.Stderr, "Docker Engine", "/nonexistent.sock", "start Docker")
	e.assertClean()
}

// TestRunInterrupts: Ctrl-C during setup gives 130, during the run the main
// command gets it (130); SIGTERM during the run gives 143; nothing is left.
func TestRunInterrupts(t *testing.T) {
	limit(t)
	for _, tc := range []struct {
		name, manifest string
		role           string // the container that runs while the setup waits
		what           string
	}{
		{"setup-service", `
[sandbox]
image = "{{image}}"
ready_timeout = "60s"

[services.slow]
image = "{{image}}"
command = ["sleep", "300"]
required = true
healthcheck = { cmd = ["false"], interval = "1s", retries = 100 }
`, "service", "a required service is pending"},
		{"setup-daemon", `
[sandbox]
image = "{{image}}"

[daemons.slow]
command = ["sleep", "300"]
timeout = 1
ready = { cmd = ["sh", "-c", "test -e {{project}}/never"], timeout = "30s" }
`, "primary", "a daemon is not ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.manifest)
			p := e.Start("run", "--", "echo", "main-ran")
			eventually(t, time.Minute, "the "+tc.role+" container to run", func() bool { return e.runningContainer(tc.role) })
			p.Signal(t, syscall.SIGINT)
			r := p.MustWait(t, time.Minute)
			if r.Code != 130 || strings.Contains(r.Stdout, "main-ran") || !strings.Contains(r.Stderr, "interrupted during setup") {
				t.Errorf("SIGINT while %s: want exit 130 saying the setup was interrupted, got %s", tc.what, r)
			}
			e.assertClean()
		})
	}
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		code int
	}{{"run-sigint", syscall.SIGINT, 130}, {"run-sigterm", syscall.SIGTERM, 143}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, plainManifest)
			p := e.Start("run", "--", "sh", "-c", "touch started; exec sleep 30")
			eventually(t, time.Minute, "the main command to start", func() bool {
				_, err := os.Stat(filepath.Join(e.Project, "started"))
				return err == nil
			})
			start := time.Now()
			p.Signal(t, tc.sig)
			r := p.MustWait(t, time.Minute)
			if r.Code != tc.code {
				t.Errorf("%v during the run: want exit %d, got %s", tc.sig, tc.code, r)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the CLI took %v to end after %v", d, tc.sig)
			}
			e.assertClean()
		})
	}
}

// TestRunStartFails: a sandbox that cannot start fails `run` with 125 before the
// main command, within a limit, naming what failed (and where to look), and
// leaves nothing behind.
func TestRunStartFails(t *testing.T) {
	for _, tc := range []struct {
		name, manifest string
		within         time.Duration
		wants          []string
	}{{
		name: "daemon-never-ready", within: cmdTimeout, wants: []string{"stuck", "daemons/stuck/", ".log"},
		manifest: `
[sandbox]
image = "{{image}}"

[daemons.stuck]
command = ["sleep", "300"]
timeout = 1
ready = { cmd = ["false"], timeout = "2s" }
`,
	}, {
		name: "missing-image", within: cmdTimeout, wants: []string{"airlock-nonexistent/image:nope"},
		manifest: `
[sandbox]
image = "airlock-nonexistent/image:nope"
`,
	}, {
		name: "required-service-unhealthy", within: 30 * time.Second, wants: []string{"service db", "db-log-line-2"},
		manifest: `
[sandbox]
image = "{{image}}"
ready_timeout = "5s"

[services.db]
image = "{{image}}"
command = ["sh", "-c", "echo db-log-line-1; echo db-log-line-2; exec sleep 300"]
required = true
healthcheck = { cmd = ["false"], interval = "500ms", timeout = "1s", retries = 2 }
`,
	}, {
		// Before any daemon or the main command runs.
		name: "daemon-user-unknown", within: 30 * time.Second,
		wants: []string{`daemon web as user "ghost": no such user in the sandbox's /etc/passwd`},
		manifest: `
[sandbox]
image = "{{image}}"
network = "none"

[daemons.web]
user = "ghost"
command = ["sleep", "300"]
`,
	}, {
		// A daemon that fails the same way on every launch before it was ever
		// ready fails the sandbox after 3 launches (about 3 s of backoff), not
		// after max_restarts' 55 s or the ready timeout.
		name: "daemon-same-failure", within: 20 * time.Second,
		wants: []string{"daemon db exited before it was ready", "failed the same way (exit 1) on 3 launches in a row", "initdb: error: cannot be run as root"},
		manifest: `
[sandbox]
image = "{{image}}"
network = "none"

[daemons.db]
command = ["sh", "-c", "echo \"initdb: error: cannot be run as root (pid $$)\" >&2; exit 1"]
restart = "on-failure"
ready = { tcp = "127.0.0.1:5432", timeout = "60s" }
`,
	}, {
		// A one-shot setup step that fails fails the start at once: its name,
		// its exit code and its last output lines; the daemon after it and
		// the main command never run.
		name: "oneshot-fails", within: cmdTimeout,
		wants: []string{"daemon schema (oneshot) failed: exit code 3", "daemons/schema/output.log", "  loading schema.sql", `  ERROR: relation "users" already exists`},
		manifest: `
[sandbox]
image = "{{image}}"
network = "none"

[daemons.schema]
oneshot = true
command = ["sh", "-c", "echo loading schema.sql; echo 'ERROR: relation \"users\" already exists' >&2; exit 3"]

[daemons.web]
after = ["schema"]
command = ["sleep", "300"]
`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			limit(t)
			newEnv(t, tc.manifest).startFails(tc.within, tc.wants...)
		})
	}
}
