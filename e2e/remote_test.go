//go:build projects

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/airlock-dev/airlock/test/testenv"
)

const remoteManifest = `
[sandbox]
image = "{{image}}"

[env]
TOKEN = "${REMOTE_TOK}"

[daemons.web]
command = ["sh", "-c", "mkdir -p /www && echo from-daemon > /www/index.html && exec httpd -f -p 8080 -h /www"]
ready = { http = "http://127.0.0.1:8080/", timeout = "10s" }
`

// newRemoteEnv is newEnv with the stand-in remote Engine: {{image}} is the busybox
// image built there, and when the test ends nothing of the project may be left
// there either. The environment's airlock still uses the local Engine unless the
// test points DOCKER_HOST (or a context) at the remote one.
func newRemoteEnv(t *testing.T, manifest string) (*env, *testenv.RemoteEngine) {
	t.Helper()
	remote := sharedRemote.Get(t)
	e := newEnv(t, "")
	e.Image = remote.BusyboxImage(t)
	e.WriteManifest(manifest)
	t.Cleanup(func() { testenv.AssertNoLeftovers(t, remote.Client, labelProject, e.Project) })
	return e, remote
}

// TestRemoteEngine: with DOCKER_HOST pointing at an Engine that cannot see this
// host's files (a second dockerd in its own mount and network namespaces, reached
// over loopback TCP), a sandbox gets its project (copied in, .airlockignore
// honoured), its ready-gated daemon, a vault secret and its exit code; --output
// copies results back; up, exec, logs and down work; host mounts are refused;
// nothing is left on either Engine (design.md §7, the channel issue).
func TestRemoteEngine(t *testing.T) {
	limit(t)
	e, remote := newRemoteEnv(t, remoteManifest)
	e.WriteFile("hello.txt", "hello from the project\n")
	e.WriteFile("secret-notes.txt", "left out\n")
	e.WriteFile(".airlockignore", "secret-notes.txt\n")
	e.Extra = append(e.Extra, "DOCKER_HOST="+remote.Host, "AIRLOCK_VAULT_PASSPHRASE=remote passphrase")

	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	set := e.Command(ctx, "secrets", "set", "REMOTE_TOK", "--stdin")
	set.Stdin = strings.NewReader("vault-remote-value\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("secrets set: %v\n%s", err, out)
	}

	r := e.Run("run", "--output", "out", "--", "sh", "-c",
		"cat hello.txt; test -e secret-notes.txt && echo ignored-file-copied; echo token=$TOKEN; wget -qO- http://127.0.0.1:8080/; mkdir -p out && echo report > out/report.txt && ln -s /etc out/link; exit 7")
	if r.Code != 7 {
		t.Fatalf("run on the remote Engine: want exit 7, got %s", r)
	}
	contains(t, "stdout", r.Stdout, "hello from the project", "token=vault-remote-value", "from-daemon")
	if strings.Contains(r.Stdout, "ignored-file-copied") {
		t.Errorf(".airlockignore was not honoured: %s", r)
	}
	if b, err := os.ReadFile(filepath.Join(e.Project, "out", "report.txt")); err != nil || string(b) != "report\n" {
		t.Errorf("--output out: %q %v", b, err)
	}
	// A symbolic link made in the sandbox is not recreated on the host.
	if _, err := os.Lstat(filepath.Join(e.Project, "out", "link")); err == nil {
		t.Errorf("--output recreated a symbolic link from the sandbox on the host")
	}
	contains(t, "stderr of run --output", r.Stderr, "skipped")
	// run hands the removal to the daemon once the code is known.
	eventually(t, testenv.RemovalGrace, "the run's container to be removed from the remote Engine", func() bool {
		return len(listProject(t, remote, e.Project)) == 0
	})

	// up, exec, logs, down.
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	if len(listProject(t, remote, e.Project)) != 1 || len(e.Containers()) != 0 {
		t.Errorf("the up sandbox is not on the remote Engine alone")
	}
	r = e.MustRun("exec", "--", "sh", "-c", "cat hello.txt; echo token=$TOKEN")
	contains(t, "exec", r.Stdout, "hello from the project", "token=vault-remote-value")
	r = e.MustRun("logs", id, "web", "--stderr")
	_ = r // httpd logs nothing; reading it through the Engine must work
	r = e.MustRun("exec", "--", "sh", "-c", "echo to-the-log >> /airlock/state/daemons/web/stdout.log")
	r = e.MustRun("logs", "--stdout", id, "web")
	contains(t, "logs --stdout", r.Stdout, "to-the-log")
	r = e.MustRun("daemon", "status")
	contains(t, "daemon status", r.Stdout, "Engine: "+remote.Host)
	e.MustRun("down")

	// A host mount cannot reach a remote Engine: a config error that says why.
	e.WriteManifest(remoteManifest + `
[mounts.cache]
source = "{{project}}"
target = "/cache"
`)
	r = e.Run("run", "--", "true")
	if r.Code != 2 {
		t.Errorf("a host mount on a remote Engine: want exit 2, got %s", r)
	}
	contains(t, "stderr", r.Stderr, "mounts.cache.source", "cannot see it")
	e.assertClean()
}

// TestDockerContexts: DOCKER_CONTEXT, and else the docker CLI's current context,
// choose the Engine as the docker CLI does.
func TestDockerContexts(t *testing.T) {
	limit(t)
	e, remote := newRemoteEnv(t, plainManifest)

	// A context store as `docker context create standin --docker host=…` writes it.
	cfg := filepath.Join(e.Home, ".docker")
	sum := sha256.Sum256([]byte("standin"))
	meta := filepath.Join(cfg, "contexts", "meta", hex.EncodeToString(sum[:]))
	if err := os.MkdirAll(meta, 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"Name": "standin", "Metadata": map[string]any{},
		"Endpoints": map[string]any{"docker": map[string]any{"Host": remote.Host, "SkipTLSVerify": false}}})
	if err := os.WriteFile(filepath.Join(meta, "meta.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	// The daemon starts with the test's environment, so that its own Engine is
	// the tests' one; the commands below unset DOCKER_HOST (which the tests may
	// have: make test-engine29), since it would win over any context.
	e.MustRun("daemon", "start")
	noHost := "DOCKER_HOST="
	onRemote := func(what string, extra ...string) {
		t.Helper()
		id := uniq("ctx")
		r := e.RunEnv(append([]string{noHost}, extra...), "run", "--keep", "--id", id, "--", "true")
		if r.Code != 0 {
			t.Fatalf("%s: %s", what, r)
		}
		if n := len(listProject(t, remote, e.Project)); n != 1 {
			t.Errorf("%s: the sandbox is not on the context's Engine (%d there)", what, n)
		}
		if r := e.RunEnv([]string{noHost}, "rm", id); r.Code != 0 {
			t.Errorf("%s: rm: %s", what, r)
		}
	}
	onRemote("DOCKER_CONTEXT=standin", "DOCKER_CONTEXT=standin")
	if err := os.WriteFile(filepath.Join(cfg, "config.json"), []byte(`{"currentContext": "standin"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	onRemote("currentContext standin")
	// DOCKER_HOST wins over the current context.
	r := e.RunEnv([]string{"DOCKER_HOST=" + localEngineHost()}, "run", "--", "sh", "-c", "exit 3")
	if r.Code != 3 {
		t.Errorf("DOCKER_HOST over the current context: %s", r)
	}
	// An unknown context is an error naming it.
	r = e.RunEnv([]string{noHost, "DOCKER_CONTEXT=nosuch"}, "run", "--", "true")
	if r.Code != 125 || !strings.Contains(r.Stderr, "nosuch") {
		t.Errorf("an unknown context: want exit 125 naming it, got %s", r)
	}
	e.assertClean()
}

func listProject(t *testing.T, remote *testenv.RemoteEngine, project string) []container.Summary {
	t.Helper()
	list, err := remote.Client.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", labelProject+"="+project))})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// localEngineHost is the tests' own Engine as DOCKER_HOST names it: theirs (make
// test-engine29), else the local socket.
func localEngineHost() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return "unix:///var/run/docker.sock"
}
